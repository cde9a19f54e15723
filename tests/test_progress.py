"""Progress: a bar on a terminal; in a log, a few plain lines without carriage returns."""

from __future__ import annotations

import io
import logging

import pytest

from asrdist import progress as progress_module
from asrdist.progress import progress, say, track


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_few_plain_lines(monkeypatch, caplog) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_module, "time", clock)
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="asrdist.progress"), \
            progress(2000, "decode", "utt", stream=stream) as bar:
        for _ in range(2000):
            clock.now += 0.5  # 1000 s in all: a line each 30 s and each 10 %
            bar.update()
        bar.set_postfix(loss="1.234")
    lines = caplog.text.splitlines()
    assert stream.getvalue() == ""
    assert "\r" not in caplog.text
    assert 10 <= len(lines) <= 1000 / 30 + 10 + 2
    assert "decode: 2000/2000 utt (100 %)" in lines[-1] and "loss=1.234" in lines[-1]


def test_a_line_per_tenth_and_none_twice(monkeypatch, caplog) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_module, "time", clock)
    with caplog.at_level(logging.INFO, logger="asrdist.progress"), \
            progress(398, "epoch 2/6", "step", stream=io.StringIO()) as bar:
        for _ in range(398):
            clock.now += 0.17  # an epoch of the demo: 68 s
            bar.update()
    counts = [line.split("epoch 2/6: ")[1].split("/")[0] for line in caplog.text.splitlines()]
    # 10 % of 398 is 39.8 steps: the first count at or past each tenth, each said once
    assert counts == ["40", "80", "120", "160", "199", "239", "279", "319", "359", "398"]


def test_a_short_loop_in_a_log_says_nothing(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="asrdist.progress"):
        assert list(track(range(5), "quick")) == [0, 1, 2, 3, 4]
    assert caplog.text == ""


def test_a_terminal_gets_a_bar() -> None:
    stream = _Terminal()
    with progress(50, "align", "utt", stream=stream) as bar:
        for _ in range(50):
            bar.update()
    assert "\r" in stream.getvalue() and "align" in stream.getvalue()
    assert "50/50" in stream.getvalue()


@pytest.mark.parametrize("stream", [io.StringIO(), _Terminal()])
def test_a_disabled_display_shows_nothing(stream, caplog) -> None:
    with caplog.at_level(logging.INFO), progress(3, "epoch", enabled=False,
                                                  stream=stream) as bar:
        bar.update(3)
    assert bar.n == 3 and stream.getvalue() == "" and caplog.text == ""


def test_a_line_said_while_a_bar_is_shown_starts_on_a_line_of_its_own() -> None:
    """grep '^asrdist:' finds it: not glued after the bar's text (issue 22)."""
    terminal = _Terminal()
    with progress(10, "epoch 1/1", "step", stream=terminal) as bar:
        bar.update(3)
        say("asrdist: learner 0: lost learner 1", stream=terminal)
    shown = terminal.getvalue().replace("\x1b[K", "").replace("\x1b[A", "").replace("\r", "\n")
    assert any(line.startswith("asrdist: learner 0: lost learner 1")
               for line in shown.split("\n")), repr(terminal.getvalue())


def test_a_line_said_on_a_terminal_clears_another_process_bar_line_first() -> None:
    terminal = _Terminal()
    say("Error: learner 1: bad", stream=terminal)
    assert terminal.getvalue() == "\r\x1b[KError: learner 1: bad\n"
    log = io.StringIO()
    say("Error: learner 1: bad", stream=log)
    assert log.getvalue() == "Error: learner 1: bad\n"
