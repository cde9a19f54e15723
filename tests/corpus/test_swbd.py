"""Switchboard / eval2000 / Fisher data prep on a miniature LDC tree (shorten SPHERE audio)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile

from asrdist.corpus.swbd_prepare import SwbdOptions, prepare_swbd
from asrdist.corpus.swbd_text import fisher_line, fisher_text, map_word, swbd_utt_id
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_table
from asrdist.kaldi.recipes import FISHER_SWBD
from asrdist.kaldi.sphere import change_speed, read_sphere
from asrdist.stage import Skipped
from asrdist.testing.sphere_writer import mulaw_decode, mulaw_encode, write_sphere
from tests.cli_process import run_cli
from tests.corpus.ldc_fixture import make_ldc_tree


@pytest.fixture(scope="module")
def ldc(tmp_path_factory):
    return make_ldc_tree(tmp_path_factory.mktemp("ldc"))


def test_shorten_sphere_written_here_reads_back_bit_exactly(tmp_path):
    rng = np.random.default_rng(1)
    x = np.stack([rng.normal(0, 3000, 3001), np.zeros(3001)], 1).astype(np.int16)
    x[100:400, 1] = (8000 * np.sin(np.arange(300) / 5)).astype(np.int16)
    write_sphere(tmp_path / "a.sph", x)
    head = (tmp_path / "a.sph").read_bytes()[:1024].decode()
    assert "sample_coding -s26 ulaw,embedded-shorten-v2.00" in head
    assert (tmp_path / "a.sph").stat().st_size < 1024 + x.size  # compressed
    samples, rate = read_sphere(tmp_path / "a.sph")
    assert rate == 8000 and samples.shape == x.shape
    np.testing.assert_array_equal(samples, mulaw_decode(mulaw_encode(x)))


def test_speed_perturbation_changes_length_by_the_factor():
    x = (1000 * np.sin(np.arange(9000) / 10)).astype(np.int16)
    assert len(change_speed(x, 0.9)) == 10000 and len(change_speed(x, 1.1)) == 8181


def test_ms98_and_fisher_normalisation_follow_kaldi():
    # what s5c's swbd1_map_words.pl printed for these words (run on this machine); the whole
    # prep is compared with Kaldi's own output in test_swbd_kaldi.py
    kaldi = {"-[laughter-yes]": "--", "[LAUGHTER-Yes]": "Yes", "[laughter-sto]-": "sto-",
             "ammu[n]it-": "ammn-t-", "ex[specially]-/especially]": "ex",
             "[lem[guini]-/linguini]": "lem-", "[an]y": "-y", "ab[solute]": "ab-",
             "them_1s": "thems", "{weather}": "weather", "[it'n/isn't]": "it'n",
             "-[laughter-story]-": "--", "[laughter-TV]": "TV"}
    assert {w: map_word(w) for w in kaldi} == kaldi
    assert map_word("them_1's", FISHER_SWBD) == "them_1's"  # fisher_swbd's copy: "_\d$"
    # fisher_data_prep.sh: %06d of t*100 truncates, words as written, "((" lines dropped
    assert fisher_line("0.29 1.13 A:  I  am ((fine)) ") == ("000028-000112", "A", "I  am ((fine))")
    assert fisher_line("1.00 2.00 B:") is None and fisher_text("I am ((fine))") is None
    assert fisher_text("[laugh] oh[sigh] [pause] [Cough]") == "[laughter] oh[noise] [pause] [Cough]"
    assert swbd_utt_id("sw2001A-ms98-a-0001", 0.977625, 11.561375) == "sw02001-A_000098-001156"


def test_prepare_writes_kaldi_dirs_with_kaldi_ids_and_splits(ldc, tmp_path):
    options = SwbdOptions(str(ldc.swbd_audio), str(ldc.ms98), str(ldc.eval2000_audio),
                          str(ldc.eval2000_ref), dev_utts=4, max_dup=2,
                          speed_factors=(0.9, 1.0, 1.1), allow_partial=True)
    out = tmp_path / "data"
    assert prepare_swbd(out, options) == out
    text = read_table(out / "train" / "text")
    assert len(text) == 20 and all(len(u) == len("sw02001-A_000127-000271") for u in text)
    assert "[silence]" not in " ".join(text.values())
    assert any(t.startswith("th- the weather") for t in text.values())
    utts = sorted(text, key=str.encode)
    assert sorted(read_table(out / "train_dev" / "text")) == utts[:4]
    nodup = read_table(out / "train_nodup" / "text")
    assert list(nodup.values()).count("yeah") == 2 and len(nodup) == 15
    for utt, seg in read_table(out / "train" / "segments").items():  # times = the id's
        start, end = utt.rsplit("_", 1)[1].split("-")
        assert [float(t) for t in seg.split()[1:]] == [int(start) / 100, int(end) / 100]
    spk = read_table(out / "train_nodup" / "utt2spk")
    assert all(spk[u] == u[:9] for u in spk)
    sp = read_table(out / "train_nodup_sp" / "segments")
    assert len(sp) == 3 * 15
    first = utts[4]
    _, reco, start, end = ["", *read_table(out / "train" / "segments")[first].split()]
    assert sp[f"sp0.9-{first}"].split() == [f"sp0.9-{reco}", f"{float(start) / 0.9:.2f}",
                                            f"{float(end) / 0.9:.2f}"]
    wav = read_table(out / "train_nodup_sp" / "wav.scp")
    assert wav["sp1.1-sw02001-B"].startswith("asrdist-sph2wav -c 2 --speed 1.1 ")
    assert wav["sw02001-B"].startswith("asrdist-sph2wav -c 2 /")  # sp1.0: recordings kept
    ev = out / "eval2000"
    assert (ev / "glm").read_text().startswith(";;")
    assert "IGNORE_TIME_SEGMENT_IN_SCORING" in (ev / "stm").read_text()
    assert len(read_table(ev / "text")) == 8  # the IGNORE segment is not an utterance
    assert read_table(ev / "reco2file_and_channel")["en_4156-B"] == "en_4156 B"
    assert read_table(out / "train_nodup_sp" / "utt2spk")[f"sp1.0-{first}"] == f"sp1.0-{reco}"
    assert isinstance(prepare_swbd(out, options), Skipped)


def test_prepare_with_fisher_makes_fisher_swbds_sets(ldc, tmp_path):
    """fisher_swbd's run.sh: train = Fisher + all of Switchboard (no train_dev), train_nodup
    drawn over both, the sp 1.0 copy unprefixed, eval2000 not extended (the whole is compared
    with Kaldi's own output in test_swbd_fisher_kaldi.py)."""
    options = SwbdOptions(str(ldc.swbd_audio), str(ldc.ms98), str(ldc.eval2000_audio),
                          str(ldc.eval2000_ref), (str(ldc.fisher_audio),),
                          (str(ldc.fisher_text),), max_dup=2, speed_factors=(0.9, 1.0, 1.1),
                          allow_partial=True)
    assert options.train_set == "train_nodup_sp"
    out = tmp_path / "data"
    prepare_swbd(out, options)
    text = read_table(out / "train" / "text")
    fisher = {u: t for u, t in text.items() if u.startswith("fe_03_")}
    assert len(text) == 20 + 3 and not (out / "train_dev").exists()
    assert set(fisher.values()) == {"hello how are you", "[laughter] that is right",
                                    "we went to the game"}  # "i am fine ((thanks))" dropped
    assert all(len(u) == len("fe_03_00001-A-000200-000434") for u in fisher)
    assert set(read_table(out / "train_swbd" / "text")) == set(text) - set(fisher)
    sp = read_table(out / "train_nodup_sp" / "utt2spk")
    nodup = read_table(out / "train_nodup" / "utt2spk")
    assert {u: s for u, s in sp.items() if u in nodup} == nodup
    assert {f"sp1.1-{u}" for u in fisher} <= set(sp)
    assert (out / "local" / "dict_nosp" / "acronyms_swbd.map").is_file()


def test_sph2wav_pipe_gives_the_channel(ldc):
    sph = ldc.swbd_audio / "swb1_d1" / "data" / "sw02001.sph"
    proc = run_cli("sph2wav", "-c", "2", sph, text=False)
    assert proc.returncode == 0, proc.stderr
    wav, rate = soundfile.read(io.BytesIO(proc.stdout), dtype="int16")
    np.testing.assert_array_equal(wav, read_sphere(sph)[0][:, 1])


@pytest.mark.parametrize("option", ["--ms98", "--eval2000-ref"])
def test_missing_or_wrong_path_names_the_option(ldc, tmp_path, option):
    args = {"--swbd-audio": ldc.swbd_audio, "--ms98": ldc.ms98,
            "--eval2000-audio": ldc.eval2000_audio, "--eval2000-ref": ldc.eval2000_ref}
    args[option] = ldc.fisher_text  # exists, but holds the wrong files
    proc = run_cli("prepare_swbd", "--out", tmp_path / "d", "--allow-partial",
                   *[x for kv in args.items() for x in kv])
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: {option} ") and "expected" in last
    with pytest.raises(AsrdistError, match="--fisher-audio and --fisher-text go together"):
        SwbdOptions("a", "b", "c", "d", fisher_audio=("x",))
