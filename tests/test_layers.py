"""The packages form layers: each may import only those below it, so no two import each other;
and no modules import each other in a circle, inside a package either.

    errors, fsutil, progress, plaindata (import nothing of asrdist but each other)
    jobs (errors, fsutil, progress), stage (errors, fsutil), options (errors), devices (errors)
    kaldi                               formats
    hmm                                 trees, transition models, graphs, alignment (kaldi)
    corpus, data, gmm (hmm), models (kaldi: a features layout), optim, parallel, score
    decode (hmm, models), train (data, models, optim, parallel)
    simulate                            (data, models, optim, parallel; train's loss)
    testing                             (data: a tiny corpus; parallel: a learner launcher;
                                         decode: lattices compared to the bit; cli and train:
                                         the planted files' runs, asrdist.testing.planted;
                                         kaldi, hmm, models: the tiny decoding system,
                                         asrdist.testing.tiny_system)
    cli                                 (anything)
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asrdist"
BASE = {"errors", "fsutil", "progress", "plaindata", "jobs", "stage", "options", "devices"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "fsutil": {"errors"},
    "progress": set(),
    "plaindata": set(),
    "jobs": {"errors", "fsutil", "progress"},
    "stage": {"errors", "fsutil"},
    "options": {"errors"},
    "devices": {"errors"},
    "kaldi": BASE,
    "hmm": BASE | {"kaldi"},
    "corpus": BASE | {"kaldi"},
    "data": BASE | {"kaldi"},
    "gmm": BASE | {"kaldi", "hmm"},
    "models": BASE | {"kaldi"},
    "parallel": BASE,
    "optim": BASE,
    "score": BASE | {"kaldi"},
    "decode": BASE | {"kaldi", "hmm", "models"},
    "train": BASE | {"kaldi", "data", "models", "parallel", "optim", "decode"},
    "simulate": BASE | {"kaldi", "data", "models", "optim", "parallel", "train"},
    "testing": BASE | {"kaldi", "hmm", "data", "models", "parallel", "decode", "cli", "train"},
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


def module_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of ``package`` and the modules of it that it imports, wherever the import
    stands (in a function too: that runs as well, only later). An import under ``if
    TYPE_CHECKING:`` counts as well: none makes a circle today, and a circle of types is
    still two modules that each need the other. A compiled module is the module its stub
    (``.pyi``) describes, as a ``.py`` one would be."""
    root = package.name
    sources = [*package.rglob("*.py"),
               *(f for f in package.rglob("*.pyi") if not f.with_suffix(".py").exists())]
    modules = {".".join(f.relative_to(package.parent).with_suffix("").parts).removesuffix(
        ".__init__"): f for f in sources}

    def resolve(name: str) -> str | None:
        """The module that importing ``name`` (a module, or a name in one) runs last."""
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, file in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module if file.name == "__init__.py" else module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        here = here.rpartition(".")[0]
                    base = f"{here}.{base}".rstrip(".")
                targets |= {f"{base}.{a.name}" for a in node.names}
        graph[module] = {t for t in map(resolve, (t for t in targets
                                                  if t.split(".")[0] == root)) if t} - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = module_imports()
    assert "asrdist.kaldi.transition_model" in graph["asrdist.kaldi.final_mdl"]
    assert circles(graph) == []


PARALLEL = "asrdist.parallel"
# parallel/'s rooms and the rooms of it each may import: the contract (its top-level
# modules) is everyone's; the pure rules import nothing else of parallel, so the simulator
# and the processes share them; strategies reach other learners only through a Transport.
PARALLEL_ROOMS: dict[str, set[str]] = {
    "rules": set(),
    "contract": {"rules"},
    "strategies": {"contract", "rules"},
    "processes": {"contract", "rules"},
    "launch": {"contract", "rules", "processes"},
}
# the contract's one arrow into processes/: a learner built without a transport gets the
# process transport over torch.distributed's default group
DEFAULT_TRANSPORT = f"{PARALLEL}.processes.transport"


def parallel_room(module: str) -> str | None:
    """The room of a module of asrdist.parallel (None outside it)."""
    parts = module.split(".")
    if parts[:2] != PARALLEL.split("."):
        return None
    return parts[2] if len(parts) > 3 else "contract"


def test_the_rooms_of_parallel_import_only_what_their_rule_allows() -> None:
    graph = module_imports()
    assert {parallel_room(m) for m in graph} - {None} == set(PARALLEL_ROOMS)
    wrong = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                   if (here := parallel_room(m)) and (there := parallel_room(t))
                   and there != here and there not in PARALLEL_ROOMS[here]
                   and not (here == "contract" and t == DEFAULT_TRANSPORT))
    assert wrong == []


def test_the_simulator_imports_nothing_of_the_process_side() -> None:
    graph = module_imports()
    reached = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith(
        "asrdist.simulate") for t in targets if parallel_room(t) in ("processes", "launch"))
    assert reached == []
