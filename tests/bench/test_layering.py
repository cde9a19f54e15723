"""bench/ is built on the package alone: no benchmark or study imports the test suite."""

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
