from bench.results import write_section


def test_write_section_replaces_its_section_only(tmp_path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\n\nintro\n\n## A\n\nold a\n\n## B\n\nb\n")
    write_section(path, "## A\n\nnew a\n")
    assert path.read_text() == "# Results\n\nintro\n\n## A\n\nnew a\n\n## B\n\nb\n"
    write_section(path, "## B\n\nnew b\n")
    assert path.read_text() == "# Results\n\nintro\n\n## A\n\nnew a\n\n## B\n\nnew b\n"
    write_section(path, "## C\n\nc\n")
    assert path.read_text().endswith("## B\n\nnew b\n\n## C\n\nc\n")


def test_scrub_names_paths_outside_the_repository(monkeypatch) -> None:
    from bench.results import REPO, scrub

    monkeypatch.chdir(REPO)
    lines = [f"--data /scratch/x/data --out /scratch/x/data/run1 --config {REPO}/recipes/c.yaml",
             "--targets recipes/mini/exp/mono_pdf"]
    assert scrub(lines, {"/scratch/x/data": "DATA", "/scratch/x/data/run1": "OUT",
                         "recipes/mini/exp/mono_pdf": "TARGETS"}) == [
        "--data DATA --out OUT --config recipes/c.yaml", "--targets recipes/mini/exp/mono_pdf"]
