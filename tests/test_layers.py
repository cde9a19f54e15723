"""The packages form layers: each may import only those below it, so no two import each other.

    errors, fsutil, progress            (import nothing of asrdist but each other)
    jobs (errors, progress), stage (errors, fsutil)
    kaldi                               formats
    corpus, data, gmm, models, optim, parallel
    decode (gmm, models), train (data, models, optim, parallel), simulate (data, models, parallel)
    cli                                 (anything)
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asrdist"
BASE = {"errors", "fsutil", "progress", "jobs", "stage"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "fsutil": {"errors"},
    "progress": set(),
    "jobs": {"errors", "progress"},
    "stage": {"errors", "fsutil"},
    "kaldi": BASE,
    "corpus": BASE | {"kaldi"},
    "data": BASE | {"kaldi"},
    "gmm": BASE | {"kaldi"},
    "models": BASE,
    "parallel": BASE,
    "optim": BASE,
    "decode": BASE | {"kaldi", "gmm", "models"},
    "train": BASE | {"kaldi", "data", "models", "parallel", "optim"},
    "simulate": BASE | {"kaldi", "data", "models", "parallel"},
    "cli": {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if p.name != "__pycache__" and not p.name.startswith("__")},
}


def imports_of(unit: str) -> set[str]:
    """The asrdist packages/modules that the files of ``unit`` import (``unit`` excluded)."""
    path = PACKAGE / unit
    files = list(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    found = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found |= {n.split(".")[1] for n in names
                      if n.startswith("asrdist.") and n.split(".")[1] in ALLOWED}
    return found - {unit}


def test_every_unit_of_the_package_has_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if p.name != "__pycache__" and not p.name.startswith("__")}
    assert units == set(ALLOWED)


def test_packages_import_only_the_layers_below_them() -> None:
    wrong = {unit: sorted(imports_of(unit) - allowed) for unit, allowed in ALLOWED.items()}
    assert {u: w for u, w in wrong.items() if w} == {}
