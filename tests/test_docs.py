"""The README and docs/*.md: every relative link resolves to a file of the checkout (and to a
heading, where it names one of a markdown page), and every `asrdist-<name>` they name is a
console script of setup.cfg (or one of the few process names listed below, each checked
against the code that sets it)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# asrdist-* names the docs use that are not commands: name -> (file, text that sets the name).
NOT_COMMANDS = {
    "asrdist-store": ("asrdist/parallel/processes/storehost.py", 'NAME = b"asrdist-store"')}

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
COMMAND = re.compile(r"(?<![\w/.-])asrdist-[a-z0-9]+(?:-[a-z0-9]+)*")
FENCE = re.compile(r"^(```|~~~)")


def doc_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def console_scripts(root: Path = ROOT) -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    lines = cfg["options.entry_points"]["console_scripts"].splitlines()
    return {line.split("=")[0].strip() for line in lines if "=" in line}


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """(number, line) of the lines outside fenced code blocks."""
    lines, in_fence = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(line.strip()):
            in_fence = not in_fence
        elif not in_fence:
            lines.append((n, line))
    return lines


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives the headings of a markdown page."""
    ids = set()
    for _, line in prose_lines(page):
        if m := re.match(r"#{1,6}\s+(.*)", line):
            ids.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return ids


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of `page` to a file that does not exist, or to a heading a markdown
    file does not have."""
    bad = []
    for n, line in prose_lines(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # a URL or mailto:
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            if not path.exists():
                bad.append(f"{page.relative_to(root)}:{n}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                bad.append(f"{page.relative_to(root)}:{n}: {target} (no such heading)")
    return bad


def unknown_commands(page: Path, known: set[str], root: Path = ROOT) -> list[str]:
    bad = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for name in COMMAND.findall(line):
            if name not in known and name not in NOT_COMMANDS:
                bad.append(f"{page.relative_to(root)}:{n}: {name}")
    return bad


def test_the_pages_exist_and_the_readme_is_short():
    names = {p.name for p in doc_pages()}
    assert {"strategies.md", "simulator.md", "cluster.md", "faults.md", "decoding.md",
            "install.md", "adding_a_strategy.md"} <= names
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_every_doc_link_resolves():
    assert [bad for page in doc_pages() for bad in broken_links(page)] == []


def test_every_asrdist_command_named_is_a_console_script():
    known = console_scripts()
    assert {"asrdist-train", "asrdist-compare", "asrdist-simulate"} <= known
    assert [bad for page in doc_pages() for bad in unknown_commands(page, known)] == []


@pytest.mark.parametrize("name", sorted(NOT_COMMANDS))
def test_the_names_that_are_not_commands_are_set_where_listed(name):
    path, text = NOT_COMMANDS[name]
    assert text in (ROOT / path).read_text()


def test_a_broken_link_and_a_misnamed_command_are_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ok.md").write_text("# ok\n\n## Training on a cluster (`--elastic`)\n")
    page = tmp_path / "README.md"
    page.write_text("[fine](docs/ok.md#training-on-a-cluster---elastic) [gone](docs/gone.md) "
                    "[web](https://example.org) [here](#a-tour) [no](docs/ok.md#nope)\n"
                    "```\n[in a code block](nowhere.md)\n```\n"
                    "run `asrdist-train`, then `asrdist-trian`; logs in asrdist-train.42.log\n")
    assert broken_links(page, tmp_path) == [
        "README.md:1: docs/gone.md", "README.md:1: #a-tour (no such heading)",
        "README.md:1: docs/ok.md#nope (no such heading)"]
    assert unknown_commands(page, {"asrdist-train"}, tmp_path) == ["README.md:5: asrdist-trian"]
