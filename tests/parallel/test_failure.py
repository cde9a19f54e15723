"""The failure policy in one process: a lone learner's error goes up as it is; one of several
learners ends the job with its error named, a traceback only for what looks like a bug."""

from __future__ import annotations

import signal

import pytest

from asrdist.errors import AsrdistError
from asrdist.parallel.launch.failure import failure_policy
from asrdist.parallel.processes import health
from asrdist.parallel.processes.preempt import Preemption
from asrdist.parallel.strategy import Learner


class _Ended(Exception):
    """Stands for the os._exit of health.fail and health.abort."""


@pytest.fixture
def ends(monkeypatch):
    """(how, rank, message) of each way this learner ended; no other learner posted."""
    seen: list[tuple[str, int, str]] = []

    def end(how):
        def record(rank, message, post=True):
            seen.append((how, rank, message))
            raise _Ended

        return record

    monkeypatch.setattr(health, "fail", end("fail"))
    monkeypatch.setattr(health, "abort", end("abort"))
    monkeypatch.setattr(health, "other_report", lambda rank: None)
    return seen


def test_a_lone_learner_s_error_goes_up_with_the_signal_handlers_restored(ends):
    preemption = Preemption([signal.SIGUSR2])
    with pytest.raises(AsrdistError, match="bad input"), failure_policy(Learner(), preemption):
        assert signal.getsignal(signal.SIGUSR2) is not signal.SIG_DFL
        raise AsrdistError("bad input")
    assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL and ends == []


def test_one_of_several_learners_names_its_own_error_without_a_traceback(ends, capsys):
    with pytest.raises(_Ended), failure_policy(Learner(1, 2)):
        raise AsrdistError("ckpt: cannot load")
    assert ends == [("fail", 1, "ckpt: cannot load")]
    assert "Traceback" not in capsys.readouterr().err


def test_a_bug_is_named_by_its_type_with_a_traceback(ends, capsys):
    with pytest.raises(_Ended), failure_policy(Learner(0, 3)):
        raise KeyError("x")
    assert ends == [("fail", 0, "KeyError: 'x'")]
    assert "Traceback" in capsys.readouterr().err


def test_an_error_after_another_learner_s_report_names_that_cause(ends, monkeypatch):
    monkeypatch.setattr(health, "other_report", lambda rank: "learner 0: disk full")
    with pytest.raises(_Ended), failure_policy(Learner(1, 2)):
        raise RuntimeError("gloo: Connection reset by peer")
    assert ends[0][:2] == ("abort", 1)
    assert ends[0][2].startswith("stopped after another learner failed (")

