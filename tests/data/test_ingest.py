"""Stage 3 ingestion: pdf targets equal khg's map, tolerated/refused length mismatches,
missing utterances, bad inputs, atomic outputs and rerun skipping."""

from __future__ import annotations

import errno
import gzip
import os
import signal
import stat
import subprocess
import sys
import time

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.data import ingest
from asrdist.data.ingest import IngestReport, ingest_alignments, read_pdf_counts
from asrdist.data.utt_index import UtteranceIndex
from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import write_alignments
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.stage import Skipped

TOPO = (
    "<Topology> <TopologyEntry> <ForPhones> 2 3 4 </ForPhones> "
    "<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State> "
    "<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State> "
    "<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State> "
    "<State> 3 </State> </TopologyEntry> "
    "<TopologyEntry> <ForPhones> 1 </ForPhones> "
    "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State> "
    "<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State> "
    "<State> 2 </State> </TopologyEntry> </Topology>"
)
UTTS = [f"spk{s}-utt{u}" for s in (1, 2) for u in range(5)]


class AliDir:
    """A tiny Kaldi alignment dir + feature dir, with the expected targets (khg's map)."""

    def __init__(self, root, diffs: dict[str, int] | None = None, utt2num_frames: bool = True):
        topo = khg.HmmTopology()
        topo.read(TOPO)
        ctx = khg.monophone_context_dependency(topo.phones, topo.get_phone_to_num_pdf_classes())
        self.tm = khg.TransitionModel(ctx, topo)
        self.ali_dir, self.data_dir, self.out = root / "mono", root / "fbank", root / "mono_pdf"
        self.ali_dir.mkdir()
        self.data_dir.mkdir()
        write_final_mdl(self.ali_dir / "final.mdl", self.tm)
        (self.ali_dir / "num_jobs").write_text("2\n")
        rng = np.random.default_rng(0)
        self.frames = {utt: int(rng.integers(20, 40)) for utt in UTTS}
        diffs = diffs or {}
        self.tids = {
            utt: rng.integers(1, self.tm.num_transition_ids + 1, n + diffs.get(utt, 0))
            for utt, n in self.frames.items()
        }
        self.write_alis(self.tids)
        feats = {u: np.zeros((n, 3), dtype=np.float32) for u, n in self.frames.items()}
        kaldiio.save_ark(
            str(self.data_dir / "feats.ark"), feats, scp=str(self.data_dir / "feats.scp")
        )
        if utt2num_frames:
            (self.data_dir / "utt2num_frames").write_text(
                "".join(f"{u} {n}\n" for u, n in self.frames.items())
            )

    def write_alis(self, tids: dict[str, np.ndarray]) -> None:
        for job, spk in ((1, "spk1"), (2, "spk2")):
            items = [(u, t) for u, t in tids.items() if u.startswith(spk)]
            write_alignments(self.ali_dir / f"ali.{job}.gz", items)

    @property
    def feats_scp(self):
        return self.data_dir / "feats.scp"

    def expected(self, utt: str) -> np.ndarray:
        pdfs = np.array([self.tm.transition_id_to_pdf(int(t)) for t in self.tids[utt]])
        n = self.frames[utt]
        return pdfs[:n] if pdfs.size >= n else np.pad(pdfs, (0, n - pdfs.size), mode="edge")

    def run(self, **kwargs) -> IngestReport:
        return ingest_alignments(self.ali_dir, self.feats_scp, self.out, **kwargs)

    def assert_nothing_complete(self) -> None:
        left = sorted(p.name for p in self.out.iterdir()) if self.out.exists() else []
        assert left == [], f"outputs left after a failure: {left}"


@pytest.mark.parametrize("utt2num_frames", [True, False], ids=["utt2num_frames", "ark-headers"])
def test_targets_match_khg_map_with_tolerated_mismatches(tmp_path, utt2num_frames):
    d = AliDir(tmp_path, {UTTS[0]: 1, UTTS[6]: -2}, utt2num_frames=utt2num_frames)
    report = d.run()
    targets = kaldiio.load_scp(str(d.out / "pdf.scp"))
    assert sorted(targets) == sorted(UTTS)
    for utt in UTTS:
        got = targets[utt]
        assert got.dtype == np.int32 and got.shape == (d.frames[utt],)
        np.testing.assert_array_equal(got, d.expected(utt))
    assert report.mismatch_histogram == {-2: 1, 0: 8, 1: 1}
    assert (d.out / "num_pdfs").read_text() == f"{d.tm.num_pdfs}\n"
    all_pdfs = np.concatenate([d.expected(u) for u in UTTS])
    counts = np.bincount(all_pdfs, minlength=d.tm.num_pdfs)
    np.testing.assert_array_equal(read_pdf_counts(d.out), counts)
    assert (d.out / "pdf_counts").read_text().startswith("[ ")
    assert report.num_aligned == 10 and report.num_missing == 0
    assert report.total_frames == sum(d.frames.values())
    assert report.zero_count_pdfs == np.flatnonzero(counts == 0).tolist()
    text = (d.out / "report.txt").read_text()
    assert "utterances aligned: 10 of 10" in text and "{-2: 1, +0: 8, +1: 1}" in text
    assert (d.out / ".ingest_ali.done").is_file()


def test_rerun_skips_and_a_changed_alignment_redoes(tmp_path):
    d = AliDir(tmp_path)
    first = d.run()
    mtime = (d.out / "pdf.ark").stat().st_mtime_ns
    again = d.run()
    assert again == Skipped(d.out, "ingest_ali") and IngestReport.load(d.out) == first
    assert (d.out / "pdf.ark").stat().st_mtime_ns == mtime
    (d.ali_dir / "ali.1.gz").write_bytes(b"garbage")  # a changed input is read again
    with pytest.raises(AsrdistError, match="ali.1.gz"):
        d.run()
    assert not (d.out / ".ingest_ali.done").exists()


def test_long_mismatch_names_utterance_and_lengths(tmp_path):
    d = AliDir(tmp_path, {UTTS[3]: 3})
    d.out.mkdir()
    (d.out / "pdf.scp").write_text("stale output of an interrupted run\n")
    n = d.frames[UTTS[3]]
    with pytest.raises(
        AsrdistError,
        match=rf"utterance {UTTS[3]}: alignment has {n + 3} frames "
        rf"but features have {n} \(difference \+3 exceeds --tolerance 2",
    ):
        d.run()
    d.assert_nothing_complete()


def test_too_many_missing_utterances_fail_and_few_pass(tmp_path):
    d = AliDir(tmp_path)
    d.write_alis({u: t for u, t in d.tids.items() if u != UTTS[7]})
    with pytest.raises(AsrdistError, match=r"1 of 10 utterances .* have no alignment .*10\.0%"):
        d.run()
    d.assert_nothing_complete()
    report = d.run(max_missing_fraction=0.1)
    assert report.num_missing == 1 and UTTS[7] not in kaldiio.load_scp(str(d.out / "pdf.scp"))
    assert "utterances missing an alignment: 1 (10.00%)" in report.to_text()


def test_missing_alignment_files_are_named(tmp_path):
    d = AliDir(tmp_path)
    (d.ali_dir / "num_jobs").write_text("4\n")
    with pytest.raises(AsrdistError, match=r"missing alignment files: ali\.3\.gz ali\.4\.gz$"):
        d.run()
    d.assert_nothing_complete()


def test_out_of_range_transition_id_names_utterance(tmp_path):
    d = AliDir(tmp_path)
    d.tids[UTTS[2]][5] = d.tm.num_transition_ids + 1
    d.write_alis(d.tids)
    with pytest.raises(AsrdistError, match=rf"ali\.1\.gz: utterance {UTTS[2]}: transition-id"):
        d.run()
    d.assert_nothing_complete()


def test_truncated_alignment_archive_is_named(tmp_path):
    d = AliDir(tmp_path)
    path = d.ali_dir / "ali.2.gz"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(AsrdistError, match=r"ali\.2\.gz: truncated or corrupt gzip"):
        d.run()
    d.assert_nothing_complete()


def test_final_mdl_that_is_not_one_is_named(tmp_path):
    d = AliDir(tmp_path)
    (d.ali_dir / "final.mdl").write_bytes(gzip.compress(b"not a model"))
    with pytest.raises(AsrdistError, match=r"final\.mdl: not a Kaldi final\.mdl"):
        d.run()
    d.assert_nothing_complete()


def _fake_ali_to_pdf(bin_dir, mode: str = "agrees") -> None:
    """An ``ali-to-pdf`` stand-in: maps with our reader ("agrees") or off by one
    ("disagrees"); fails as Kaldi does, naming nothing we could check ("fails"); or, on its
    second archive, hangs after one entry with its pid in bin_dir/hung ("hangs")."""
    script = bin_dir / "ali-to-pdf"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, time\n"
        "from asrdist.kaldi.alignments import parse_int32_ark\n"
        "from asrdist.kaldi.transition_model import read_transition_model\n"
        f"mode, bin_dir = {mode!r}, {str(bin_dir)!r}\n"
        "if mode == 'fails':\n"
        "    sys.exit('ERROR (ali-to-pdf[5.5]:main():ali-to-pdf.cc:69) bad model')\n"
        "second = os.path.exists(bin_dir + '/started')\n"
        "open(bin_dir + '/started', 'w').close()\n"
        "info = read_transition_model(sys.argv[1])\n"
        "for utt, tids in parse_int32_ark(sys.stdin.buffer.read(), 'stdin'):\n"
        "    pdfs = info.tid_to_pdf[tids] + (mode == 'disagrees')\n"
        "    print(utt, *pdfs.tolist(), flush=True)\n"
        "    if mode == 'hangs' and second:\n"
        "        with open(bin_dir + '/hung.tmp', 'w') as f:\n"
        "            f.write(str(os.getpid()))\n"
        "        os.rename(bin_dir + '/hung.tmp', bin_dir + '/hung')\n"
        "        time.sleep(600)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _on_path(monkeypatch, tmp_path, mode: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_ali_to_pdf(bin_dir, mode)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@pytest.mark.parametrize("wrong", [False, True], ids=["agrees", "disagrees"])
def test_optional_ali_to_pdf_cross_check(tmp_path, monkeypatch, wrong):
    d = AliDir(tmp_path)
    _on_path(monkeypatch, tmp_path, "disagrees" if wrong else "agrees")
    if wrong:
        with pytest.raises(AsrdistError, match=r"pdf-ids differ from ali-to-pdf's"):
            d.run()
        d.assert_nothing_complete()
    else:
        assert d.run().cross_checked_with_ali_to_pdf
        assert "cross-checked with ali-to-pdf: yes" in (d.out / "report.txt").read_text()


def test_failing_ali_to_pdf_is_named_with_its_error(tmp_path, monkeypatch):
    d = AliDir(tmp_path)
    _on_path(monkeypatch, tmp_path, "fails")
    with pytest.raises(AsrdistError, match=r"ali\.1\.gz: ali-to-pdf failed: ERROR \(ali-to-pdf"):
        d.run()
    d.assert_nothing_complete()


def test_killed_run_leaves_nothing_that_looks_done_and_a_rerun_cleans_up(tmp_path, monkeypatch):
    """A real process, SIGKILLed in the middle of the second archive (its first archive's
    targets written to the unfinished pdf.ark)."""
    d = AliDir(tmp_path)
    bin_dir = _on_path(monkeypatch, tmp_path, "hangs")
    code = ("import sys; from asrdist.data.ingest import ingest_alignments; "
            "ingest_alignments(*sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d.ali_dir), str(d.feats_scp),
                             str(d.out)])
    try:
        deadline = time.monotonic() + 60
        while not (bin_dir / "hung").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "never reached ali.2.gz"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
        if (bin_dir / "hung").exists():
            os.kill(int((bin_dir / "hung").read_text()), signal.SIGKILL)
    left = sorted(p.name for p in d.out.iterdir())
    assert not [name for name in left if not name.startswith(".")], left
    assert ".ingest_ali.done" not in left
    assert any(name.startswith(".pdf.ark.") and name.endswith(".tmp") for name in left), left
    assert any(name.startswith(".ingest_ali.index.") for name in left), left
    with pytest.raises(AsrdistError, match="marked done but report.json is missing"):
        IngestReport.load(d.out)

    monkeypatch.undo()  # Kaldi's stand-in off PATH again
    assert d.run().num_aligned == len(UTTS)
    assert sorted(p.name for p in d.out.iterdir()) == sorted(
        [*("pdf.ark", "pdf.scp", "num_pdfs", "pdf_counts", "report.txt", "report.json"),
         ".ingest_ali.done"])


def test_pdf_scp_keeps_feats_order_whatever_order_the_alignments_come_in(tmp_path):
    d = AliDir(tmp_path)
    lines = d.feats_scp.read_text().splitlines()
    d.feats_scp.write_text("\n".join(reversed(lines)) + "\n")  # not the archives' order
    d.run()
    scp = (d.out / "pdf.scp").read_text().splitlines()
    assert [line.split()[0] for line in scp] == [line.split()[0] for line in reversed(lines)]
    targets = kaldiio.load_scp(str(d.out / "pdf.scp"))
    for utt in UTTS:
        np.testing.assert_array_equal(targets[utt], d.expected(utt))


@pytest.mark.parametrize("name", ["feats.scp", "utt2num_frames"])
def test_duplicate_feature_utterance_names_the_line(tmp_path, name):
    d = AliDir(tmp_path)
    path = d.data_dir / name
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[3]]) + "\n")
    with pytest.raises(AsrdistError, match=rf"{name}:{len(lines) + 1}: duplicate key {UTTS[3]}$"):
        d.run()
    d.assert_nothing_complete()


@pytest.mark.parametrize("with_features", [True, False])
def test_utterance_aligned_twice_is_named(tmp_path, with_features):
    d = AliDir(tmp_path)
    utt = UTTS[1] if with_features else "spk9-stray"
    tids = dict(d.tids)
    tids[utt] = d.tids[UTTS[1]]
    write_alignments(d.ali_dir / "ali.1.gz", [(u, t) for u, t in tids.items()
                                              if not u.startswith("spk2")])
    write_alignments(d.ali_dir / "ali.2.gz", [(u, t) for u, t in tids.items()
                                              if u.startswith("spk2") or u == utt])
    with pytest.raises(AsrdistError, match=rf"ali\.2\.gz: utterance {utt} aligned more than once"):
        d.run()
    d.assert_nothing_complete()


def test_alignments_without_features_are_counted_and_ignored(tmp_path):
    d = AliDir(tmp_path)
    write_alignments(d.ali_dir / "ali.2.gz", [(u, t) for u, t in d.tids.items()
                                              if u.startswith("spk2")]
                     + [("spk3-extra", d.tids[UTTS[0]]), ("spk4-extra", d.tids[UTTS[1]])])
    report = d.run()
    assert report.num_without_features == 2 and report.num_aligned == len(UTTS)
    assert "spk3-extra" not in (d.out / "pdf.scp").read_text()


def test_frames_of_compressed_features_come_from_their_headers(tmp_path, monkeypatch):
    """make_fbank.sh's default arks are compressed; no utt2num_frames: every length comes from
    a matrix header, none from loading a matrix (millions of them at Switchboard's size)."""
    from asrdist.kaldi import data_dir

    d = AliDir(tmp_path, {UTTS[4]: -1}, utt2num_frames=False)
    feats = {u: np.ones((n, 3), dtype=np.float32) for u, n in d.frames.items()}
    kaldiio.save_ark(str(d.data_dir / "feats.ark"), feats, scp=str(d.feats_scp),
                     compression_method=2)

    def no_load(*args, **kwargs):
        raise AssertionError("a feature matrix was loaded")

    monkeypatch.setattr(data_dir.kaldiio, "load_mat", no_load)
    report = d.run()
    assert report.mismatch_histogram == {-1: 1, 0: 9}
    assert report.total_frames == sum(d.frames.values())


def test_full_disk_names_the_file_being_written(tmp_path, monkeypatch):
    """A write's OSError names no file: the error says which output met the full disk."""
    d = AliDir(tmp_path)

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ingest, "write_int32_ark", disk_full)
    with pytest.raises(AsrdistError, match=f"^{d.out.resolve() / 'pdf.ark'}: cannot write: "
                                           "No space left on device$"):
        d.run()
    d.assert_nothing_complete()


def test_full_disk_under_the_scratch_index_names_it(tmp_path, monkeypatch):
    """SQLite's own "database or disk is full" (the index may grow no further: the feature
    list needs more pages than the schema's) names the file."""
    d = AliDir(tmp_path)
    with open(d.feats_scp, "a") as f:
        f.writelines(f"extra-{i:05d} {d.data_dir}/feats.ark:{i}\n" for i in range(2000))
    made = UtteranceIndex.__init__

    def no_room(self, path):
        made(self, path)
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        self.db.execute(f"PRAGMA max_page_count = {pages}")

    monkeypatch.setattr(UtteranceIndex, "__init__", no_room)
    with pytest.raises(AsrdistError, match=rf"^{d.out}/\.ingest_ali\.index\.\w+\.sqlite: cannot "
                                           "write: database or disk is full$"):
        d.run()
    d.assert_nothing_complete()
