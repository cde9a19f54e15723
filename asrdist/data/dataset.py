"""Streaming chunk dataset: features + pdf targets from disk, in bounded memory.

What stays in memory is an index of O(number of utterances) (ids, read locations, frame
counts) and a shuffle buffer of a fixed number of chunks; features are read one utterance at
a time (kaldiio random access), so Switchboard-2000 trains in the same memory as a toy set.

Every epoch the training utterances are permuted from (seed, epoch) and dealt to the learners
round-robin; from the frame counts every learner computes every learner's chunk count and
runs ``min(chunks) // batch_size`` steps, so all learners take the same number of steps
without talking to each other.

A chunk is ``chunk_len`` labelled frames plus the model's context frames either side (edges
repeat the first/last frame, as Kaldi's splice-feats). An utterance of T frames gives
ceil(T / chunk_len) chunks: the last one is moved back to end at frame T and its frames
already covered by the previous chunk are masked (target -100), so every frame is trained on
once per epoch and a BLSTM never sees padding, except in utterances shorter than a chunk.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kaldiio
import numpy as np

from asrdist.data.targets import load_int32_vector
from asrdist.errors import AsrdistError
from asrdist.kaldi.cmvn import apply_cmvn, cmvn_stats
from asrdist.kaldi.data_dir import DataDir, read_table
from asrdist.kaldi.feats_config import read_feats_config
from asrdist.kaldi.layout import Layout, needs_speaker_stats, normalise, read_layout
from asrdist.plaindata import to_array, to_tensor

log = logging.getLogger(__name__)

IGNORE = -100  # target of a frame that carries no loss (padding, overlap)
CMVN_KINDS = ("spk", "utt", "none")


def read_num_pdfs(targets_dir: Path) -> int:
    """The number of output classes written by ingestion."""
    path = targets_dir / "num_pdfs"
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError) as e:
        raise AsrdistError(f"{path}: cannot read the number of pdfs ({e})") from e


@dataclass
class Corpus:
    """The joined index of features and targets; rows are utterances, sorted by id."""

    utts: list[str]
    feats: list[Any]  # where to read each utterance: a Kaldi rxspecifier or a lhotse cut
    targets: list[str]  # Kaldi rxspecifiers into pdf.ark
    num_frames: np.ndarray  # int64
    speakers: list[str]
    num_pdfs: int
    cmvn_stats: dict[str, np.ndarray]  # speaker -> Kaldi CMVN stats (spk CMVN only)
    source: str  # "kaldi" or "lhotse"
    # each column range's normalisation (feats_layout of joined features); None: --cmvn for all
    feats_layout: Layout | None = None
    # the original (utt2uniq) of each utterance: its speed/reverb copies share it
    originals: list[str] | None = None
    # what made the features (feats_config.json); None: not recorded (a lhotse manifest, a
    # Kaldi or joined features dir)
    feats_config: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.utts)


def _kaldi_features(path: Path) -> tuple[dict[str, Any], dict[str, int], dict[str, str], dict]:
    data = DataDir.load(path)
    if not (path / "utt2num_frames").is_file():
        log.warning("%s missing: reading the feature matrix headers to count frames",
                    path / "utt2num_frames")
    return data.feats, data.num_frames(), data.utt2spk, data.cmvn_stats()


def _lhotse_features(manifest: Path) -> tuple[dict[str, Any], dict[str, int], dict[str, str], dict]:
    from lhotse import CutSet

    feats, num_frames, utt2spk = {}, {}, {}
    for cut in CutSet.from_file(manifest):
        if not cut.has_features:
            raise AsrdistError(f"{manifest}: cut {cut.id} has no features")
        feats[cut.id] = cut  # lhotse knows how to cut its features out of the storage
        num_frames[cut.id] = cut.num_frames
        sups = getattr(cut, "supervisions", None)
        utt2spk[cut.id] = (sups[0].speaker if sups and sups[0].speaker else cut.id)
    return feats, num_frames, utt2spk, {}


def load_corpus(
    data: str | os.PathLike, targets: str | os.PathLike, max_missing_frac: float = 0.05
) -> Corpus:
    """Join features (Kaldi data dir or lhotse cuts manifest) with ingested pdf targets.

    Utterances without targets are dropped with a warning, unless they are more than
    ``max_missing_frac`` of the features: then the two inputs do not belong together.
    """
    data, targets = Path(data), Path(targets)
    is_lhotse = data.is_file() and data.name.endswith((".jsonl.gz", ".jsonl"))
    if not data.exists():
        raise AsrdistError(f"{data}: no such features dir or manifest")
    feats, num_frames, utt2spk, cmvn = (
        _lhotse_features(data) if is_lhotse else _kaldi_features(data)
    )
    pdf_scp = targets / "pdf.scp"
    if not pdf_scp.is_file():
        raise AsrdistError(f"{pdf_scp}: missing; --targets must be an ingested alignment dir")
    pdfs = read_table(pdf_scp, require_value=True)
    num_pdfs = read_num_pdfs(targets)
    missing = sorted(set(feats) - set(pdfs))
    if feats and len(missing) > max_missing_frac * len(feats):
        raise AsrdistError(
            f"targets missing for {len(missing)} of {len(feats)} utterances of {data} "
            f"(e.g. {missing[0]}) in {pdf_scp}; were the alignments made for these features?"
        )
    if missing:
        log.warning("%d utterances have no targets in %s; skipped", len(missing), pdf_scp)
    no_frames = sorted(u for u in feats if u in pdfs and u not in num_frames)
    if no_frames:
        raise AsrdistError(f"{data}: no frame count for utterance {no_frames[0]}")
    utts = sorted(u for u in feats if u in pdfs and num_frames[u] > 0)
    if not utts:
        raise AsrdistError(f"no utterance of {data} has targets in {pdf_scp}")
    uniq = data / "utt2uniq"
    utt2uniq = read_table(uniq, require_value=True) if not is_lhotse and uniq.is_file() else {}
    return Corpus(
        utts=utts,
        feats=[feats[u] for u in utts],
        targets=[pdfs[u] for u in utts],
        num_frames=np.array([num_frames[u] for u in utts], dtype=np.int64),
        speakers=[utt2spk.get(u, u) for u in utts],
        num_pdfs=num_pdfs,
        cmvn_stats=cmvn,
        source="lhotse" if is_lhotse else "kaldi",
        feats_layout=None if is_lhotse else read_layout(data),
        originals=[utt2uniq.get(u, u) for u in utts],
        feats_config=None if is_lhotse else read_feats_config(data),
    )


def split_heldout(corpus: Corpus, num_utts: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, held-out rows): ``num_utts`` original utterances picked by a seeded hash of
    their id, each held out with all its copies.

    By recording: the speed and reverb copies of an utterance (utt2uniq names its original)
    are the same speech, so a copy left in training would make the held-out loss optimistic
    (Kaldi's get_egs.sh adds "all perturbed versions of the same 'real' utterances" to its
    valid_uttlist). ``num_utts`` counts originals, so an augmented set holds out the same
    originals as its clean set (a set without utt2uniq: each utterance its own original, as
    before), and as many held-out rows per original as it has copies. A hash, not a random
    draw over the list, so the choice of an utterance does not change when others are added
    or removed; every learner computes the same split.
    """
    originals = corpus.originals or corpus.utts
    groups = sorted(set(originals))
    num_utts = min(num_utts, len(groups) - 1)
    if num_utts <= 0:
        return np.arange(len(corpus)), np.arange(0)
    picked = set(sorted(groups, key=lambda g: hashlib.md5(f"{seed}/{g}".encode()).digest())
                 [:num_utts])
    held = np.array([o in picked for o in originals])
    return np.flatnonzero(~held), np.flatnonzero(held)


class UtteranceReader:
    """Reads one utterance's normalized features and targets, checking them on the way."""

    def __init__(self, corpus: Corpus, cmvn: str, norm_vars: bool, input_dim: int | None) -> None:
        if cmvn not in CMVN_KINDS:
            raise AsrdistError(f"--cmvn {cmvn!r}: choose one of {', '.join(CMVN_KINDS)}")
        layout = corpus.feats_layout
        if layout is not None and cmvn != "spk":
            raise AsrdistError(f"--cmvn {cmvn}: the --data dir's feats_layout sets each column "
                               "range's normalisation; rejoin with asrdist-join-feats "
                               "--src-norm to change it")
        if (needs_speaker_stats(layout) if layout else cmvn == "spk") and not corpus.cmvn_stats:
            raise AsrdistError("--cmvn spk needs cmvn.scp in the --data dir; use --cmvn utt")
        self.corpus = corpus
        self.cmvn = cmvn
        self.norm_vars = norm_vars
        self.input_dim = input_dim
        self._fds: dict = {}  # open ark files of this reader (one reader per thread)

    def _load_feats(self, i: int) -> np.ndarray:
        loc = self.corpus.feats[i]
        try:
            if self.corpus.source == "kaldi":
                return np.asarray(kaldiio.load_mat(loc, fd_dict=self._fds), dtype=np.float32)
            return np.asarray(loc.load_features(), dtype=np.float32)
        except Exception as e:  # noqa: BLE001 - any reader failure is bad input here
            raise AsrdistError(f"utterance {self.corpus.utts[i]}: cannot read features {e}") from e

    def read(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(frames x dim float32, frames int64) for corpus row ``i``."""
        utt = self.corpus.utts[i]
        feats = self._load_feats(i)
        if feats.ndim != 2:
            raise AsrdistError(f"utterance {utt}: features are not a matrix")
        if not np.isfinite(feats).all():  # else a NaN loss later, naming no utterance
            frame = int(np.nonzero(~np.isfinite(feats).all(axis=1))[0][0])
            raise AsrdistError(f"utterance {utt}: features hold NaN or inf (first at frame "
                               f"{frame}, {self.corpus.feats[i]}); fix or drop the utterance")
        if self.input_dim is not None and feats.shape[1] != self.input_dim:
            raise AsrdistError(
                f"utterance {utt}: feature dimension {feats.shape[1]} does not match the "
                f"model's input dimension {self.input_dim}"
            )
        try:
            pdfs = load_int32_vector(self.corpus.targets[i], self._fds)
        except Exception as e:  # noqa: BLE001
            raise AsrdistError(f"utterance {utt}: cannot read targets ({e})") from e
        if pdfs.ndim != 1 or len(pdfs) != len(feats):
            raise AsrdistError(
                f"utterance {utt}: {len(pdfs)} targets for {len(feats)} feature frames"
            )
        if len(pdfs) and (pdfs.min() < 0 or pdfs.max() >= self.corpus.num_pdfs):
            raise AsrdistError(
                f"utterance {utt}: pdf id {int(pdfs.max())} outside 0..{self.corpus.num_pdfs - 1}"
            )
        if self.corpus.feats_layout is not None or self.cmvn != "none":
            feats = self._normalize(utt, i, feats)
        return np.ascontiguousarray(feats, dtype=np.float32), pdfs.astype(np.int64, copy=False)

    def _normalize(self, utt: str, i: int, feats: np.ndarray) -> np.ndarray:
        layout = self.corpus.feats_layout
        if layout is None and self.cmvn == "utt":
            return apply_cmvn(feats, cmvn_stats(feats), norm_vars=self.norm_vars)
        spk = self.corpus.speakers[i]
        stats = self.corpus.cmvn_stats.get(spk)
        if stats is None and (layout is None or needs_speaker_stats(layout)):
            raise AsrdistError(f"utterance {utt}: no CMVN stats for speaker {spk} in cmvn.scp")
        try:
            if layout is not None:
                return normalise(feats, layout, stats, self.norm_vars)
            return apply_cmvn(feats, stats, norm_vars=self.norm_vars)
        except AsrdistError as e:
            raise AsrdistError(f"utterance {utt}, speaker {spk}: {e.message}") from e

    def close(self) -> None:
        for fd in self._fds.values():
            fd.close()
        self._fds.clear()


def check_sample(reader: UtteranceReader, rank: int, world_size: int, count: int = 64) -> None:
    """Read an evenly spread sample of ``count`` utterances of the corpus (this learner's share)
    before training, so a missing or damaged ark, NaN features or a pdf id out of range fails in
    seconds, naming the utterance, rather than hours in; every other utterance is checked the
    same way when training first reads it."""
    n = len(reader.corpus)
    picked = np.unique(np.linspace(0, n - 1, min(count, n)).round().astype(int))
    for i in picked[rank::world_size]:
        reader.read(int(i))


def chunk_count(num_frames: np.ndarray, chunk_len: int) -> np.ndarray:
    """Chunks per utterance: ceil(T / chunk_len)."""
    return -(-num_frames // chunk_len)


def make_chunks(
    feats: np.ndarray, pdfs: np.ndarray, chunk_len: int, left: int, right: int
) -> tuple[np.ndarray, np.ndarray]:
    """All chunks of one utterance: (n, left + chunk_len + right, dim), (n, chunk_len)."""
    frames = len(feats)
    n = -(-frames // chunk_len)
    starts = np.arange(n) * chunk_len
    if frames >= chunk_len:
        starts[-1] = frames - chunk_len
    tail = max(0, chunk_len - frames)
    padded, targets = feats, pdfs
    if left or right or tail:
        padded = np.concatenate(
            [np.repeat(feats[:1], left, 0), feats, np.repeat(feats[-1:], right + tail, 0)]
        )
        targets = np.concatenate([pdfs, np.full(tail, IGNORE, dtype=np.int64)])
    width = left + chunk_len + right
    x = padded[starts[:, None] + np.arange(width)]
    y = targets[starts[:, None] + np.arange(chunk_len)]
    if n > 1 and frames % chunk_len:
        y[-1, : chunk_len - frames % chunk_len] = IGNORE  # already in the previous chunk
    return x, y


def epoch_shards(
    train_rows: np.ndarray, seed: int, epoch: int, world_size: int
) -> list[np.ndarray]:
    """Every learner's utterance rows for ``epoch``, in the order it reads them."""
    rng = np.random.default_rng([seed, epoch])
    perm = train_rows[rng.permutation(len(train_rows))]
    return [perm[r::world_size] for r in range(world_size)]


def steps_per_epoch(
    corpus: Corpus, train_rows: np.ndarray, chunk_len: int, batch_size: int, seed: int,
    epoch: int, world_size: int,
) -> int:
    """The number of batches every learner takes in ``epoch`` (the smallest shard decides)."""
    chunks = chunk_count(corpus.num_frames, chunk_len)
    shards = epoch_shards(train_rows, seed, epoch, world_size)
    return int(min(chunks[s].sum() for s in shards) // batch_size)


class ChunkStream:
    """One learner's batches for one epoch through a shuffle buffer of whole chunks.

    The buffer holds up to ``buffer_chunks`` chunks; a batch is ``batch_size`` slots drawn at
    random, which the following chunks refill. Its state (read position, buffer content, RNG)
    is small and goes into checkpoints, so a resumed run sees exactly the same batches.
    """

    def __init__(
        self,
        reader: UtteranceReader,
        rows: np.ndarray,
        chunk_len: int,
        left: int,
        right: int,
        batch_size: int,
        buffer_chunks: int,
        seed: list[int],
    ) -> None:
        if buffer_chunks < batch_size:
            raise AsrdistError(
                f"--shuffle-buffer {buffer_chunks} is smaller than --batch-size {batch_size}"
            )
        self.reader = reader
        self.rows = rows
        self.chunk_len, self.left, self.right = chunk_len, left, right
        self.batch_size = batch_size
        self.capacity = buffer_chunks
        self.rng = np.random.default_rng(seed)
        self.cursor = 0  # next position in ``rows``
        self.fill = 0
        self.x: np.ndarray | None = None  # allocated at the first chunk (dim known then)
        self.y = np.empty((buffer_chunks, chunk_len), dtype=np.int64)
        self.pending: tuple[np.ndarray, np.ndarray] | None = None  # rest of an utterance

    def _push(self, x: np.ndarray, y: np.ndarray) -> None:
        if self.x is None:
            self.x = np.empty((self.capacity, *x.shape[1:]), dtype=np.float32)
        take = min(len(x), self.capacity - self.fill)
        self.x[self.fill : self.fill + take] = x[:take]
        self.y[self.fill : self.fill + take] = y[:take]
        self.fill += take
        self.pending = (x[take:], y[take:]) if take < len(x) else None

    def _refill(self) -> None:
        while self.fill < self.capacity:
            if self.pending is not None:
                self._push(*self.pending)
                continue
            if self.cursor >= len(self.rows):
                return
            feats, pdfs = self.reader.read(int(self.rows[self.cursor]))
            self.cursor += 1
            self._push(*make_chunks(feats, pdfs, self.chunk_len, self.left, self.right))

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(batch, left + chunk_len + right, dim) float32 and (batch, chunk_len) int64."""
        self._refill()
        b = self.batch_size
        if self.fill < b:
            raise StopIteration
        idx = self.rng.choice(self.fill, b, replace=False)
        x, y = self.x[idx], self.y[idx]
        # close the holes with the surviving chunks from the end of the filled region
        tail = np.arange(self.fill - b, self.fill)
        holes = idx[idx < self.fill - b]
        movers = tail[~np.isin(tail, idx)]
        self.x[holes] = self.x[movers]
        self.y[holes] = self.y[movers]
        self.fill -= b
        return x, y

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        while True:
            try:
                yield self.next_batch()
            except StopIteration:
                return

    def state_dict(self) -> dict[str, Any]:
        """The position, generator and buffered chunks, as plain data and tensors."""
        return {
            "cursor": self.cursor,
            "rng": self.rng.bit_generator.state,
            "x": None if self.x is None else to_tensor(self.x[: self.fill]),
            "y": to_tensor(self.y[: self.fill]),
            "pending": None if self.pending is None else tuple(map(to_tensor, self.pending)),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = state["cursor"]
        self.rng.bit_generator.state = state["rng"]
        self.fill = 0
        self.pending = None
        if state["x"] is not None and len(state["x"]):
            self._push(to_array(state["x"]), to_array(state["y"]))
        pending = state["pending"]
        self.pending = None if pending is None else (to_array(pending[0]), to_array(pending[1]))


def heldout_batches(
    reader: UtteranceReader, rows: np.ndarray, chunk_len: int, left: int, right: int,
    batch_size: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The held-out chunks in order, in batches; the same every time, nothing kept."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    held = 0
    for row in rows:
        x, y = make_chunks(*reader.read(int(row)), chunk_len, left, right)
        xs.append(x)
        ys.append(y)
        held += len(x)
        while held >= batch_size:
            bx, by = np.concatenate(xs), np.concatenate(ys)
            yield bx[:batch_size], by[:batch_size]
            xs, ys = [bx[batch_size:]], [by[batch_size:]]
            held -= batch_size
    if held:
        yield np.concatenate(xs), np.concatenate(ys)
