from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import (
    Utterance,
    c_sorted,
    read_table,
    staged_dir,
    validate_data_dir,
    write_data_dir,
)


def _utts() -> list[Utterance]:
    ids = ["v10-000002", "v01-000005", "v01-000001", "v10-000000", "V02-000003"]
    return [Utterance(u, u.split("-")[0], f"text of {u}", f"/wav/{u}.wav") for u in ids]


def test_written_tables_are_c_sorted_and_consistent(tmp_path: Path):
    write_data_dir(tmp_path / "d", _utts())
    utts = validate_data_dir(tmp_path / "d")
    assert utts == ["V02-000003", "v01-000001", "v01-000005", "v10-000000", "v10-000002"]
    for name in ("wav.scp", "text", "utt2spk"):
        keys = [line.split()[0] for line in (tmp_path / "d" / name).read_text().splitlines()]
        assert keys == utts
    assert read_table(tmp_path / "d" / "spk2utt") == {
        "V02": "V02-000003", "v01": "v01-000001 v01-000005", "v10": "v10-000000 v10-000002"}
    assert read_table(tmp_path / "d" / "text")["v01-000005"] == "text of v01-000005"


def test_c_sorted_is_byte_order():
    assert c_sorted(["b", "B", "a", "_x", "é"]) == ["B", "_x", "a", "b", "é"]


def test_utterance_must_start_with_its_speaker(tmp_path: Path):
    with pytest.raises(AsrdistError, match="x-1 does not start with its speaker id v01"):
        write_data_dir(tmp_path / "d", [Utterance("x-1", "v01", "hi", "/a.wav")])


def test_validate_catches_a_missing_text_line(tmp_path: Path):
    write_data_dir(tmp_path / "d", _utts())
    text = tmp_path / "d" / "text"
    text.write_text("".join(text.read_text().splitlines(keepends=True)[1:]))
    with pytest.raises(AsrdistError, match="text and wav.scp list different utterances"):
        validate_data_dir(tmp_path / "d")


def test_staged_dir_leaves_nothing_when_the_writer_fails(tmp_path: Path):
    with pytest.raises(RuntimeError), staged_dir(tmp_path / "out") as tmp:
        (tmp / "half").write_text("written")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_read_table_splits_on_any_whitespace_and_checks_keys(tmp_path: Path):
    table = tmp_path / "utt2spk"
    table.write_text("u1\tspkA\nu2  spkB  \n\nu3\n")
    assert read_table(table) == {"u1": "spkA", "u2": "spkB", "u3": ""}
    with pytest.raises(AsrdistError, match=r"utt2spk:4: expected '<key> <value>'"):
        read_table(table, require_value=True)
    table.write_text("u1 a\nu1 b\n")
    with pytest.raises(AsrdistError, match=r"utt2spk:2: duplicate key u1"):
        read_table(table)
    with pytest.raises(AsrdistError, match="missing file"):
        read_table(tmp_path / "nothing")


@pytest.mark.parametrize("compression", [None, 1, 2, 3], ids=["FM", "CM2", "CM", "CM2-3"])
def test_matrix_rows_reads_only_the_header(tmp_path: Path, monkeypatch, compression):
    import kaldiio
    import numpy as np

    from asrdist.kaldi import data_dir

    matrices = {"a": np.ones((7, 5), np.float32), "b": np.ones((300, 40), np.float32)}
    kaldiio.save_ark(str(tmp_path / "f.ark"), matrices, scp=str(tmp_path / "f.scp"),
                     compression_method=compression)
    scp = read_table(tmp_path / "f.scp")
    rows = {u: kaldiio.load_mat(rx).shape[0] for u, rx in scp.items()}
    assert rows == {"a": 7, "b": 300}

    def no_load(*args, **kwargs):
        raise AssertionError("matrix loaded to count its rows")

    monkeypatch.setattr(data_dir.kaldiio, "load_mat", no_load)
    assert {u: data_dir.matrix_rows(u, rx) for u, rx in scp.items()} == rows
    files: dict = {}  # the ark kept open from one utterance to the next
    assert {u: data_dir.matrix_rows(u, rx, files) for u, rx in scp.items()} == rows
    assert list(files) == [str(tmp_path / "f.ark")]
    files[str(tmp_path / "f.ark")].close()
