"""The backend follows the learners' device: CPU learners on a host that has GPUs train with
gloo (real learners, asrdist-train's CLI, forked), and control collectives are CPU tensors."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from asrdist.parallel.processes.transport import ProcessTransport
from asrdist.parallel.rules.timing import StepTimes
from asrdist.testing import make_corpus
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


@pytest.mark.parametrize("algo", ["ssgd", "adpsgd-random"])
def test_cpu_learners_on_a_gpu_host_finish_with_gloo(corpus, tmp_path, monkeypatch, algo):
    """The learners (forked) see a host with 8 GPUs; were the backend NCCL, as CUDA's presence
    once chose, this CPU build could not even create the group, and on a GPU host the final
    stop flag (a CPU tensor) could not be reduced."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    out = tmp_path / algo
    procs = start_learners(corpus, out, algo, *TINY_MODEL, "--epochs=1", "--max-steps=4",
                           "--exchange-timeout=20", "--distance-every=0")
    assert join_learners(procs, out) == [0, 0], (out / "err0.txt").read_text()[-2000:]
    assert (out / "final.pt").exists()


def test_the_stop_flag_is_a_cpu_tensor(monkeypatch):
    """``any_`` is a control collective: on the CPU (gloo's half of a CUDA learner's group)."""
    seen: list[torch.device] = []
    monkeypatch.setattr(dist, "all_reduce", lambda t, op=None: seen.append(t.device))
    transport = ProcessTransport.__new__(ProcessTransport)
    transport.elastic, transport._times, transport.liveness = False, StepTimes(), None
    transport.any_(True)
    assert seen == [torch.device("cpu")]
