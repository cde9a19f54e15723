"""A script's figures go to its own generated file; the readings and the page of findings are
written by hand, and every link of that page resolves."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from asrdist.errors import AsrdistError
from bench import results
from bench.results import REPO, scrub

FAKE_STUDY = '''
"""A fake study: one table whose figure is its argument."""
import argparse

from bench.results import publish, publish_option


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--figure", type=float, required=True)
    publish_option(ap, __file__)
    args = ap.parse_args(argv)
    publish(["## Fake study", "", "| figure |", "|---|", f"| {args.figure:g} |"], args.publish)
'''


def _fake_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The fake study as a module of its own, its generated and reading dirs under tmp_path."""
    monkeypatch.setattr(results, "GENERATED", tmp_path / "results")
    monkeypatch.setattr(results, "READINGS", tmp_path / "readings")
    script = tmp_path / "fake_study.py"
    script.write_text(FAKE_STUDY)
    spec = importlib.util.spec_from_file_location("fake_study", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_rerun_regenerates_its_file_and_leaves_its_reading(tmp_path, monkeypatch) -> None:
    study = _fake_study(tmp_path, monkeypatch)
    reading = tmp_path / "readings" / "fake_study.md"
    reading.parent.mkdir()
    reading.write_text("# Fake study: reading\n\nThe figure is 1 (by hand).\n")
    study.main(["--figure", "1", "--publish"])
    generated = tmp_path / "results" / "fake_study.md"
    assert generated.read_text() == "## Fake study\n\n| figure |\n|---|\n| 1 |\n"
    study.main(["--figure", "2.5", "--publish"])
    assert generated.read_text() == "## Fake study\n\n| figure |\n|---|\n| 2.5 |\n"
    assert reading.read_text() == "# Fake study: reading\n\nThe figure is 1 (by hand).\n"
    assert sorted(p.name for p in tmp_path.rglob("*.md")) == ["fake_study.md", "fake_study.md"]


def test_without_publish_nothing_is_written(tmp_path, monkeypatch, capsys) -> None:
    _fake_study(tmp_path, monkeypatch).main(["--figure", "3"])
    assert "| 3 |" in capsys.readouterr().out and not (tmp_path / "results").exists()


def test_publish_refuses_the_hand_written_files() -> None:
    for path in (results.FINDINGS, results.READINGS / "straggler.md"):
        with pytest.raises(AsrdistError, match="is written by hand"):
            results.publish(["## Straggler resilience"], path)


def test_scrub_names_paths_outside_the_repository(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    lines = [f"--data /scratch/x/data --out /scratch/x/data/run1 --config {REPO}/recipes/c.yaml",
             "--targets recipes/mini/exp/mono_pdf"]
    assert scrub(lines, {"/scratch/x/data": "DATA", "/scratch/x/data/run1": "OUT",
                         "recipes/mini/exp/mono_pdf": "TARGETS"}) == [
        "--data DATA --out OUT --config recipes/c.yaml", "--targets recipes/mini/exp/mono_pdf"]


# --- the page of findings and the files it links to

BENCH = REPO / "bench"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    out = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def _links(path: Path) -> list[str]:
    return [m for m in LINK.findall(path.read_text()) if not re.match(r"[a-z]+://", m)]


@pytest.mark.parametrize("page", [BENCH / "RESULTS.md", *sorted((BENCH / "readings").glob("*.md")),
                                  *sorted((BENCH / "results").glob("*.md"))],
                         ids=lambda p: str(p.relative_to(BENCH)))
def test_every_link_resolves_to_a_file_and_anchor(page: Path) -> None:
    for link in _links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.is_file(), f"{page.name}: {link}"
        if anchor:
            assert anchor in _anchors(path), f"{page.name}: {link}"


def test_the_findings_page_links_every_generated_section_and_reading() -> None:
    linked = {(BENCH / link.partition("#")[0]).resolve() for link in _links(BENCH / "RESULTS.md")}
    files = {*(BENCH / "results").glob("*.md"), *(BENCH / "readings").glob("*.md")}
    assert {f.relative_to(BENCH) for f in files - linked} == set()


def test_the_findings_page_is_short_lines() -> None:
    long = [n for n, line in enumerate((BENCH / "RESULTS.md").read_text().splitlines(), 1)
            if len(line) > 200]
    assert long == []


def test_each_generated_section_belongs_to_a_script_that_publishes_it() -> None:
    """``<script>.md``, or a second section ``<script>_<what>.md`` that its script names (the
    command that publishes it, in its docstring)."""
    for path in (BENCH / "results").glob("*.md"):
        stems = [path.stem, path.stem.rpartition("_")[0]]
        scripts = [BENCH / f"{stem}.py" for stem in stems if stem] + \
            [BENCH / "studies" / f"{stem}.py" for stem in stems if stem]
        script = next((s for s in scripts if s.is_file()), None)
        assert script is not None, path.name
        assert "publish_option(" in script.read_text(), script.name
        if script.stem != path.stem:
            assert f"--publish bench/results/{path.name}" in script.read_text(), path.name
