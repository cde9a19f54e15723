"""Tests marked ``cuda`` need a CUDA device: skipped without one, run by ``make gpu-check``.

kaldi_decoder is loaded first, so that a test may build a graph (kaldilm) and then decode to
lattices in its own process (asrdist.decode.lattice.load_kaldi_decoder)."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (first of the Kaldi wheels: DESIGN.md section 7)

# isort: split
import os
import secrets

import kaldi_decoder  # noqa: F401  (before kaldilm: tests build graphs, then decode lattices)
import pytest
import torch

from asrdist.parallel.processes.secret import SECRET_ENV


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _skip_cuda_tests(items)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        items[:] = deal_heavy_tests(items, workers)


def _skip_cuda_tests(items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


def deal_heavy_tests(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The collection reordered for pytest-xdist's work stealing (``--dist worksteal``), which
    hands worker w the w-th contiguous share and steals from a share's end: each share begins
    with heavy tests (``@pytest.mark.heavy(seconds)``, whole recipes of minutes), a module's
    together (their fixtures are built once), modules dealt largest first to the least loaded
    share; the light tests fill the shares in collection order. Without this the minutes-long
    tests, collected together, would queue on one worker and end the run alone."""
    heavy: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("heavy"):
            heavy.setdefault(item.module.__name__, []).append(item)
    light = [item for item in items if not item.get_closest_marker("heavy")]
    cost = {name: sum(i.get_closest_marker("heavy").args[0] for i in group)
            for name, group in heavy.items()}
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for name in sorted(heavy, key=lambda n: (-cost[n], n)):
        w = loads.index(min(loads))
        shares[w] += heavy[name]
        loads[w] += cost[name]
    left, ordered = len(items), []
    for w, share in enumerate(shares):  # xdist's share sizes: what is left over those left
        size = left // (workers - w)
        take = max(size - len(share), 0)
        ordered += share + light[:take]
        light, left = light[take:], left - max(size, len(share))
    return ordered + light


@pytest.fixture(autouse=True)
def run_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """The run secret every learner of a test's runs shares, as a launcher hands it over
    (asrdist.parallel.processes.secret): the learners that tests start in-process or as
    subprocesses, in any test package; a test of the run dir's secret file unsets it."""
    value = secrets.token_hex(16)
    monkeypatch.setenv(SECRET_ENV, value)
    return value
