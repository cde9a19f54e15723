"""bench.exchange_cost's compute-stream part at its tiny size (CPU, seconds): the rows
bench.gpu_check publishes, from real learner processes exchanging."""

from __future__ import annotations

from bench.exchange_cost import gpu_rows


def test_tiny_gpu_rows_run_on_cpu_and_name_both_roles():
    rows = gpu_rows(tiny=True)
    table = [r for r in rows if r.startswith("| ") and not r.startswith("| role")]
    assert [r.split(" | ")[0] for r in table] == ["| active", "| passive"]
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6
        assert float(cells[1]) > 0 and float(cells[2]) > 0 and cells[3].endswith("%")
    assert "tiny" in rows[0] and "cpu" in rows[0]
