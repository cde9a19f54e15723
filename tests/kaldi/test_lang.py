"""prepare_lang: the Kaldi lang dir's tables, disambiguation symbols, topology and lexicon FSTs."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst
import pytest

from asrdist.errors import AsrdistError
from asrdist.fsutil import is_done
from asrdist.kaldi.lang import prepare_lang

LEXICON = """<unk> SPN
a A
ab A B
b B
two T UW
too T UW
"""


def write_dict(d: Path, lexicon: str = LEXICON) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "silence_phones.txt").write_text("SIL\nSPN\n")
    (d / "nonsilence_phones.txt").write_text("A\nB\nT\nUW\n")
    (d / "optional_silence.txt").write_text("SIL\n")
    (d / "lexicon.txt").write_text(lexicon)
    return d


def table(path: Path) -> dict[str, int]:
    return {s: int(i) for s, i in (line.split() for line in path.read_text().splitlines())}


@pytest.fixture(scope="module")
def lang(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lang")
    prepare_lang(write_dict(root / "dict"), root / "lang")
    return root / "lang"


def test_symbol_tables_are_kaldi_ordered(lang: Path) -> None:
    phones = table(lang / "phones.txt")
    assert list(phones) == ["<eps>", "SIL", "SPN", "A", "B", "T", "UW", "#0", "#1", "#2", "#3"]
    assert list(phones.values()) == list(range(len(phones)))
    words = table(lang / "words.txt")
    assert list(words) == ["<eps>", "<unk>", "a", "ab", "b", "too", "two", "#0", "<s>", "</s>"]
    assert (lang / "oov.txt").read_text().split() == ["<unk>"]
    assert int((lang / "oov.int").read_text()) == words["<unk>"]
    assert is_done(lang, "lang")


def test_phone_sets_consistent_with_phones_txt(lang: Path) -> None:
    phones = table(lang / "phones.txt")
    for name in ("silence", "nonsilence", "optional_silence", "disambig", "context_indep"):
        txt = (lang / "phones" / f"{name}.txt").read_text().split()
        ints = [int(x) for x in (lang / "phones" / f"{name}.int").read_text().split()]
        assert ints == [phones[p] for p in txt], name
    assert (lang / "phones" / "silence.txt").read_text().split() == ["SIL", "SPN"]
    assert (lang / "phones" / "disambig.txt").read_text().split() == ["#0", "#1", "#2", "#3"]


def test_topology_has_3_state_phones_and_5_state_silence(lang: Path) -> None:
    topo = khg.HmmTopology()
    topo.read((lang / "topo").read_text())
    assert topo.phones == [1, 2, 3, 4, 5, 6]
    assert topo.get_phone_to_num_pdf_classes()[1:] == [5, 5, 3, 3, 3, 3]
    state0 = topo.topology_for_phone(3)[0]
    assert sorted(state0.transitions) == [(0, 0.75), (1, 0.25)]


def _phones_of(fst_path: Path, word_ids: list[int]) -> list[int]:
    lex = kaldifst.StdVectorFst.read(str(fst_path))
    assert lex.is_olabel_sorted
    path = kaldifst.shortest_path(kaldifst.compose(lex, kaldifst.make_linear_acceptor(word_ids)))
    ok, ilabels, olabels, _ = kaldifst.get_linear_symbol_sequence(path)
    assert ok and olabels == word_ids
    return ilabels


def test_word_path_in_L_yields_its_phones(lang: Path) -> None:
    p, w = table(lang / "phones.txt"), table(lang / "words.txt")
    # Cheapest path: no silence anywhere (each optional silence costs as much as its absence).
    assert _phones_of(lang / "L.fst", [w["two"], w["b"]]) == [p["T"], p["UW"], p["B"]]


def test_disambig_symbols_in_L_disambig(lang: Path) -> None:
    p, w = table(lang / "phones.txt"), table(lang / "words.txt")
    # 'a' is a prefix of 'ab': #1; 'two'/'too' are homophones: #1 and #2 in lexicon order.
    assert _phones_of(lang / "L_disambig.fst", [w["a"]]) == [p["A"], p["#1"]]
    assert _phones_of(lang / "L_disambig.fst", [w["two"]]) == [p["T"], p["UW"], p["#1"]]
    assert _phones_of(lang / "L_disambig.fst", [w["too"]]) == [p["T"], p["UW"], p["#2"]]
    assert _phones_of(lang / "L_disambig.fst", [w["ab"]]) == [p["A"], p["B"]]
    lex = kaldifst.StdVectorFst.read(str(lang / "L_disambig.fst"))
    loops = [
        (a.ilabel, a.olabel)
        for s in range(lex.num_states)
        for a in kaldifst.ArcIterator(lex, s)
        if a.nextstate == s
    ]
    assert (p["#0"], w["#0"]) in loops
    # optional silence is followed by the extra disambiguation symbol #3
    ilabels = {a.ilabel for s in range(lex.num_states) for a in kaldifst.ArcIterator(lex, s)}
    assert p["#3"] in ilabels


@pytest.mark.parametrize(
    ("lexicon", "match"),
    [
        ("<unk> SPN\na A\nbad\n", "lexicon.txt:3: word 'bad' has no phones"),
        ("<unk> SPN\nx A Q\n", r"lexicon.txt:2: phone 'Q' of word 'x'"),
    ],
)
def test_bad_lexicon_line_names_file_and_line(tmp_path: Path, lexicon: str, match: str) -> None:
    d = write_dict(tmp_path / "dict", lexicon)
    with pytest.raises(AsrdistError, match=match):
        prepare_lang(d, tmp_path / "lang")
    assert not (tmp_path / "lang").exists()


def test_missing_dict_file(tmp_path: Path) -> None:
    d = write_dict(tmp_path / "dict")
    (d / "optional_silence.txt").unlink()
    with pytest.raises(AsrdistError, match="optional_silence.txt: missing"):
        prepare_lang(d, tmp_path / "lang")
