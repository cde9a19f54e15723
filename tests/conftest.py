"""Tests marked ``cuda`` need a CUDA device: skipped without one, run by ``make gpu-check``.

kaldi_decoder is loaded first, so that a test may build a graph (kaldilm) and then decode to
lattices in its own process (asrdist.decode.lattice.load_kaldi_decoder)."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (first of the Kaldi wheels: DESIGN.md section 7)

# isort: split
import secrets

import kaldi_decoder  # noqa: F401  (before kaldilm: tests build graphs, then decode lattices)
import pytest
import torch

from asrdist.parallel.secret import SECRET_ENV


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def run_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """The run secret every learner of a test's runs shares, as a launcher hands it over
    (asrdist.parallel.secret): the learners that tests start in-process or as subprocesses,
    in any test package; a test of the run dir's secret file unsets it."""
    value = secrets.token_hex(16)
    monkeypatch.setenv(SECRET_ENV, value)
    return value
