"""bench/ is built on the package alone: no benchmark or study imports the test suite, or
another module's private names (bench's or the package's: what bench needs of them is public)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_bench_does_not_import_tests() -> None:
    files = sorted(BENCH.rglob("*.py"))
    assert files
    offenders = {str(f.relative_to(BENCH.parent)): sorted(n for n in _imported(f)
                                                           if n.split(".")[0] == "tests")
                 for f in files}
    assert {f: names for f, names in offenders.items() if names} == {}


OURS = ("bench", "asrdist")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _privates_used(source: str) -> list[str]:
    """The private names of bench's and the package's modules that ``source`` imports or
    reaches through a name it imported (``module._name``, ``module.sub._name``)."""
    tree = ast.parse(source)
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update(a.asname or a.name.split(".")[0] for a in node.names
                         if a.name.split(".")[0] in OURS)
        elif isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").split(".")[0] in OURS):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.module}.{alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(node.ctx, ast.Store):
            continue
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name) and root.id in bound and _private(node.attr):
            found.append(".".join([root.id, *reversed(chain)]))
    return found


def test_bench_uses_no_private_name_of_another_module() -> None:
    offenders = {str(f.relative_to(BENCH.parent)): _privates_used(f.read_text())
                 for f in sorted(BENCH.rglob("*.py"))}
    assert {f: names for f, names in offenders.items() if names} == {}


def test_a_private_name_imported_or_reached_through_a_module_is_found() -> None:
    source = """
import bench.train_throughput as tt
from asrdist.parallel.processes import preempt
from bench.probes.files import _said, error_line
from .files import _tail
import torch.distributed as dist

tt._config()
preempt._PREFIX
preempt.sub._x.y
dist.distributed_c10d._get_default_store()
error_line.__doc__
"""
    assert sorted(_privates_used(source)) == ["bench.probes.files._said", "files._tail",
                                              "preempt._PREFIX", "preempt.sub._x",
                                              "tt._config"]
