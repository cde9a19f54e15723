"""The on-disk utterance index of ingestion: frame counts from utt2num_frames or the matrix
headers, duplicates named by line, claims and placements, feats.scp's order kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.data.utt_index import BATCH, UtteranceIndex
from asrdist.errors import AsrdistError


def _index(tmp_path: Path, scp: str, utt2num_frames: str | None = None):
    data = tmp_path / "data"
    data.mkdir()
    (data / "feats.scp").write_text(scp)
    if utt2num_frames is not None:
        (data / "utt2num_frames").write_text(utt2num_frames)
    return UtteranceIndex(tmp_path / "index.sqlite"), data / "feats.scp"


def test_frames_from_utt2num_frames_and_headers_for_the_rest(tmp_path):
    index, scp = _index(tmp_path, "c a.ark:1\na a.ark:2\nb a.ark:3\n", "a 10\nc 30\nz 99\n")
    asked = []

    def rows(utt: str, rx: str) -> int:
        asked.append((utt, rx))
        return 20

    assert index.load_features(scp, rows) == 3
    assert asked == [("b", "a.ark:3")]  # only the utterance utt2num_frames does not list
    assert [index.claim(u, Path("ali.1.gz")) for u in ("a", "b", "c")] == [10, 20, 30]
    assert index.claim("z", Path("ali.1.gz")) is None  # listed, but has no features


def test_placed_keeps_feats_order_and_missing_counts_the_rest(tmp_path):
    utts = [f"u{n:06d}" for n in range(BATCH + 5)][::-1]  # more than one batch, not sorted
    index, scp = _index(tmp_path, "".join(f"{u} x.ark:{n}\n" for n, u in enumerate(utts)))
    index.load_features(scp, lambda utt, rx: 7)
    rank = {u: n for n, u in enumerate(sorted(utts))}  # the alignments' order
    for utt in sorted(utts):
        if rank[utt] % 3:
            assert index.claim(utt, Path("ali.1.gz")) == 7
            index.place(utt, 1000 + rank[utt])
    placed = list(index.placed())
    assert [u for u, _ in placed] == [u for u in utts if rank[u] % 3]
    assert all(offset == 1000 + rank[u] for u, offset in placed)
    assert index.num_missing() == len(range(0, len(utts), 3))


def test_a_claimed_utterance_claimed_again_is_named(tmp_path):
    index, scp = _index(tmp_path, "a x.ark:1\n")
    index.load_features(scp, lambda utt, rx: 5)
    index.claim("a", Path("ali.1.gz"))
    index.place("a", 0)  # still in the pending batch
    with pytest.raises(AsrdistError, match=r"^ali\.2\.gz: utterance a aligned more than once$"):
        index.claim("a", Path("ali.2.gz"))
    assert index.claim("stray", Path("ali.1.gz")) is None
    with pytest.raises(AsrdistError, match=r"ali\.3\.gz: utterance stray aligned more than once"):
        index.claim("stray", Path("ali.3.gz"))


@pytest.mark.parametrize(
    ("scp", "message"),
    [
        ("a x.ark:1\nb\n", r"feats\.scp:2: expected '<key> <value>'"),
        ("a x.ark:1\n\nb x.ark:2\na x.ark:3\n", r"feats\.scp:4: duplicate key a$"),
        ("a x.ark:1\n\xff x.ark:2\n", r"feats\.scp:2: not UTF-8 text"),
    ],
    ids=["bare-key", "duplicate", "not-utf8"],
)
def test_bad_feats_scp_lines_are_named(tmp_path, scp, message):
    index, path = _index(tmp_path, "")
    path.write_bytes(scp.encode("latin-1"))
    with pytest.raises(AsrdistError, match=message):
        index.load_features(path, lambda utt, rx: 1)


def test_non_numeric_frame_count_is_named(tmp_path):
    index, scp = _index(tmp_path, "a x.ark:1\n", "a ten\n")
    with pytest.raises(AsrdistError, match=r"utt2num_frames: utterance a: frame count 'ten'"):
        index.load_features(scp, lambda utt, rx: 1)
