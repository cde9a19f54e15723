"""The streaming chunk dataset: chunking, shuffle buffer, sharding, resume state, bad input."""

from __future__ import annotations

import hashlib
import logging

import kaldiio
import numpy as np
import pytest

from asrdist.data.dataset import (
    IGNORE,
    ChunkStream,
    UtteranceReader,
    epoch_shards,
    heldout_batches,
    load_corpus,
    make_chunks,
    split_heldout,
    steps_per_epoch,
)
from asrdist.errors import AsrdistError
from asrdist.testing import make_corpus


@pytest.fixture
def corpus_dirs(tmp_path):
    return make_corpus(tmp_path, num_utts=12, dim=8)


@pytest.mark.parametrize("frames", [3, 10, 21, 25, 42, 50])
def test_chunks_label_every_frame_exactly_once(frames):
    feats = np.arange(frames * 2, dtype=np.float32).reshape(frames, 2)
    pdfs = np.arange(frames, dtype=np.int64)
    x, y = make_chunks(feats, pdfs, chunk_len=10, left=2, right=3)
    assert x.shape == (max(1, -(-frames // 10)), 15, 2)
    labelled = y[y != IGNORE]
    assert sorted(labelled.tolist()) == list(range(frames))
    # each labelled target sits under the frame it labels, context around it
    for c in range(len(x)):
        for t in range(10):
            if y[c, t] != IGNORE:
                np.testing.assert_array_equal(x[c, 2 + t], feats[y[c, t]])
    np.testing.assert_array_equal(x[0, 0], feats[0])  # left edge repeats the first frame
    np.testing.assert_array_equal(x[-1, -1], feats[-1])  # right edge repeats the last frame


def test_reader_normalizes_per_speaker(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    reader = UtteranceReader(corpus, "spk", False, None)
    spk0 = [i for i, s in enumerate(corpus.speakers) if s == "spk0"]
    stacked = np.concatenate([reader.read(i)[0] for i in spk0])
    np.testing.assert_allclose(stacked.mean(0), 0, atol=1e-4)
    raw = np.asarray(kaldiio.load_mat(corpus.feats[spk0[0]]))
    assert np.abs(raw.mean(0)).max() > 0.1  # the raw features were not centred


def _drain(stream, steps):
    return [stream.next_batch() for _ in range(steps)]


def test_stream_yields_each_chunk_once_in_bounded_memory(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    rows = np.arange(len(corpus))
    reader = UtteranceReader(corpus, "none", False, None)
    total = sum(len(make_chunks(*reader.read(i), 10, 0, 0)[0]) for i in rows)
    stream = ChunkStream(reader, rows, 10, 0, 0, batch_size=1, buffer_chunks=8, seed=[0])
    batches = list(stream)
    assert len(batches) == total
    assert stream.x.shape[0] == 8  # the buffer never grew
    seen = sorted(tuple(b[0][0, :, 0].tolist()) for b in batches)
    expected = sorted(
        tuple(x[:, 0].tolist()) for i in rows for x in make_chunks(*reader.read(i), 10, 0, 0)[0]
    )
    assert seen == expected
    first_utt_chunks = len(make_chunks(*reader.read(0), 10, 0, 0)[0])
    order = [tuple(b[0][0, :, 0].tolist()) for b in batches[:first_utt_chunks]]
    assert order != expected[:first_utt_chunks]  # shuffled, not in reading order


def test_stream_state_resumes_the_same_batches(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    rows = np.arange(len(corpus))

    def stream():
        reader = UtteranceReader(corpus, "utt", True, None)
        return ChunkStream(reader, rows, 7, 1, 1, batch_size=4, buffer_chunks=10, seed=[3, 1])

    full = _drain(stream(), 12)
    first = stream()
    _drain(first, 5)
    state = first.state_dict()
    resumed = stream()
    resumed.load_state_dict(state)
    for (xa, ya), (xb, yb) in zip(full[5:], _drain(resumed, 7), strict=True):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


def test_shards_partition_the_data_and_steps_agree(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    train, heldout = split_heldout(corpus, 2, seed=0)
    assert len(heldout) == 2 and not set(train) & set(heldout)
    np.testing.assert_array_equal(split_heldout(corpus, 2, seed=0)[1], heldout)
    shards = epoch_shards(train, seed=0, epoch=1, world_size=3)
    assert sorted(np.concatenate(shards).tolist()) == sorted(train.tolist())
    assert not np.array_equal(epoch_shards(train, 0, 2, 3)[0], shards[0])  # reshuffled
    steps = steps_per_epoch(corpus, train, 10, 2, seed=0, epoch=1, world_size=3)
    for shard in shards:  # every learner has at least that many batches
        reader = UtteranceReader(corpus, "none", False, None)
        stream = ChunkStream(reader, shard, 10, 0, 0, 2, 4, seed=[0])
        assert len(list(stream)) >= steps


def test_heldout_batches_cover_all_heldout_frames(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    reader = UtteranceReader(corpus, "none", False, None)
    rows = np.array([0, 3, 5])
    labelled = sum(int((y != IGNORE).sum()) for _, y in heldout_batches(reader, rows, 9, 0, 0, 4))
    assert labelled == int(corpus.num_frames[rows].sum())


def test_many_missing_targets_is_an_error(tmp_path):
    data, targets = make_corpus(tmp_path, num_utts=10)
    lines = (targets / "pdf.scp").read_text().splitlines()
    (targets / "pdf.scp").write_text("\n".join(lines[:6]) + "\n")
    with pytest.raises(AsrdistError, match="targets missing for 4 of 10 utterances"):
        load_corpus(data, targets)


def test_few_missing_targets_are_skipped(tmp_path, caplog):
    data, targets = make_corpus(tmp_path, num_utts=10)
    lines = (targets / "pdf.scp").read_text().splitlines()
    (targets / "pdf.scp").write_text("\n".join(lines[1:]) + "\n")
    with caplog.at_level(logging.WARNING):
        corpus = load_corpus(data, targets, max_missing_frac=0.2)
    assert len(corpus) == 9 and "1 utterances have no targets" in caplog.text


def test_feature_dimension_mismatch_names_the_utterance(corpus_dirs):
    corpus = load_corpus(*corpus_dirs)
    reader = UtteranceReader(corpus, "none", False, input_dim=13)
    with pytest.raises(AsrdistError, match=f"utterance {corpus.utts[0]}: feature dimension 8"):
        reader.read(0)


def test_target_length_mismatch_names_the_utterance(tmp_path):
    data, targets = make_corpus(tmp_path, num_utts=4)
    utt = load_corpus(data, targets).utts[1]
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'bad.ark'},{tmp_path / 'bad.scp'}") as w:
        w(utt, np.zeros(5, dtype=np.int32))
    lines = [
        (tmp_path / "bad.scp").read_text().strip() if line.startswith(utt + " ") else line
        for line in (targets / "pdf.scp").read_text().splitlines()
    ]
    (targets / "pdf.scp").write_text("\n".join(lines) + "\n")
    corpus = load_corpus(data, targets)
    with pytest.raises(AsrdistError, match=f"utterance {utt}: 5 targets for"):
        UtteranceReader(corpus, "none", False, None).read(1)


def test_lhotse_cuts_manifest_is_a_feature_source(tmp_path):
    from lhotse import CutSet, Features, MonoCut, SupervisionSegment
    from lhotse.features.io import NumpyFilesWriter

    data, targets = make_corpus(tmp_path, num_utts=4, dim=8)
    kaldi = load_corpus(data, targets)
    cuts = []
    with NumpyFilesWriter(tmp_path / "lhotse") as w:
        for utt, rx, spk in zip(kaldi.utts, kaldi.feats, kaldi.speakers, strict=True):
            mat = np.asarray(kaldiio.load_mat(rx))
            seconds = len(mat) * 0.01
            feats = Features(type="fbank", num_frames=len(mat), num_features=8, frame_shift=0.01,
                             sampling_rate=16000, start=0, duration=seconds,
                             storage_type=w.name, storage_path=w.storage_path,
                             storage_key=w.write(utt, mat))
            sup = SupervisionSegment(id=utt, recording_id=utt, start=0, duration=seconds,
                                     speaker=spk)
            cuts.append(MonoCut(id=utt, start=0, duration=seconds, channel=0, features=feats,
                                supervisions=[sup]))
    CutSet.from_cuts(cuts).to_file(tmp_path / "cuts.jsonl.gz")
    corpus = load_corpus(tmp_path / "cuts.jsonl.gz", targets)
    assert corpus.source == "lhotse" and corpus.utts == kaldi.utts
    np.testing.assert_array_equal(corpus.num_frames, kaldi.num_frames)
    a = UtteranceReader(corpus, "utt", False, 8).read(2)
    b = UtteranceReader(kaldi, "utt", False, 8).read(2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(AsrdistError, match="needs cmvn.scp"):
        UtteranceReader(corpus, "spk", False, 8)


def _augmented_dir(root, with_uniq=True, copies=("sp0.9-", "sp1.1-", "rvb1-")):
    """Ten originals o0..o9 and, when ``copies``, their speed and reverb copies (Kaldi's ids);
    utt2uniq maps each copy to its original (the originals themselves: some listed, some not,
    as combine_data.sh may leave them)."""
    data, targets = root / "data", root / "targets"
    data.mkdir(parents=True)
    targets.mkdir()
    originals = [f"o{k}" for k in range(10)]
    utts = sorted(originals + [p + o for p in copies for o in originals])
    uniq = {u: u.split("-")[-1] for u in utts}
    kaldiio.save_ark(str(data / "feats.ark"), {u: np.ones((2, 2), np.float32) for u in utts},
                     scp=str(data / "feats.scp"))
    kaldiio.save_ark(str(targets / "pdf.ark"), {u: np.zeros(2, np.int32) for u in utts},
                     scp=str(targets / "pdf.scp"))
    (targets / "num_pdfs").write_text("1\n")
    (data / "utt2spk").write_text("".join(f"{u} {u}\n" for u in utts))
    if with_uniq and copies:
        (data / "utt2uniq").write_text("".join(f"{u} {uniq[u]}\n" for u in utts
                                               if u != uniq[u] or u < "o5"))
    return load_corpus(data, targets), uniq


def test_heldout_by_recording_keeps_every_copy_of_a_heldout_utterance_out(tmp_path):
    corpus, uniq = _augmented_dir(tmp_path / "aug")
    train, heldout = split_heldout(corpus, 3, seed=0)
    held = {uniq[corpus.utts[i]] for i in heldout}
    assert len(held) == 3 and len(heldout) == 3 * 4  # three originals, each with its 3 copies
    assert not held & {uniq[corpus.utts[i]] for i in train}
    assert len(train) + len(heldout) == len(corpus)
    # the clean set holds out the same originals: held-out losses of the two compare
    clean, _ = _augmented_dir(tmp_path / "clean", copies=())
    assert {clean.utts[i] for i in split_heldout(clean, 3, seed=0)[1]} == held
    # without utt2uniq, utterances are held out one by one and copies leak into training
    plain, _ = _augmented_dir(tmp_path / "plain", with_uniq=False)
    train, heldout = split_heldout(plain, 3, seed=0)
    first = sorted(plain.utts, key=lambda u: hashlib.md5(f"0/{u}".encode()).digest())[:3]
    assert sorted(plain.utts[i] for i in heldout) == sorted(first)  # the split of before
    assert {uniq[plain.utts[i]] for i in heldout} & {uniq[plain.utts[i]] for i in train}


def test_heldout_leaves_at_least_one_original_to_train_on(tmp_path):
    corpus, uniq = _augmented_dir(tmp_path)
    train, heldout = split_heldout(corpus, 100, seed=1)
    assert len({uniq[corpus.utts[i]] for i in train}) == 1 and len(train) == 4
