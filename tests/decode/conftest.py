"""Fixtures shared by the decoding tests: one tiny system and its graph per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.decode.graph import make_graph
from asrdist.testing.tiny_system import TinySystem, make_system


@pytest.fixture(scope="session")
def tiny_system(tmp_path_factory) -> TinySystem:
    return make_system(tmp_path_factory.mktemp("tiny") / "sys")


@pytest.fixture(scope="session")
def tiny_graph(tiny_system: TinySystem) -> Path:
    return make_graph(tiny_system.lang, tiny_system.mono / "final.mdl", tiny_system.train_text,
                      tiny_system.root / "graph", order=3)
