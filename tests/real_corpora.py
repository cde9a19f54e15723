"""Where the shared real recordings are (../shared/corpora beside the checkout, or
$ASRDIST_CORPORA), for tests that must meet human speech; they skip, saying why, elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def corpora_root() -> Path:
    """$ASRDIST_CORPORA, else ../shared/corpora next to the repository."""
    return Path(os.environ.get("ASRDIST_CORPORA", REPO.parent / "shared" / "corpora"))


def real_corpus(name: str) -> Path:
    """``corpora_root()/name``, or skip the test naming the missing directory."""
    path = corpora_root() / name
    if not path.is_dir():
        pytest.skip(f"{path}: real recordings not here (set ASRDIST_CORPORA to the shared "
                    "corpora directory to run this test)")
    return path
