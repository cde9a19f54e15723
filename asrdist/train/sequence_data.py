"""What sequence training reads beside the features: each utterance's denominator lattice and
numerator alignment, and the epoch's batches of whole utterances.

Whole utterances, not chunks with a piece of the lattice each (Kaldi's
nnet3-discriminative-get-egs splits lattices at chunk boundaries and approximates the
boundaries' weights with the old model's forward-backward scores): a lattice's
forward-backward is exact only over the whole utterance, and the corpora here are cut into
utterances of seconds (LJSpeech at most 10 s, Switchboard's segments at most ~15 s). Each
utterance is still scored as training and decoding score it, in chunks of ``chunk_len``
frames with the model's context (:func:`~asrdist.data.dataset.make_chunks`), so the network
sees the windows it was trained on; the gradient flows through every chunk.

The lattices are read once at the start, a block of one lat.N.gz at a time, checked and
converted to flat arrays (:mod:`asrdist.train.lattice_arrays`, int32 and float64: a few times
the lat.N.gz files), and those go to an unlinked temporary file
(:mod:`asrdist.train.spilled_arrays`), as the alignments' int32 transition-ids do: memory keeps
a few ints per utterance, and a step reads back its utterances' arrays. A learner's memory
then does not grow with the lattices; the temp dir's disk holds them instead.
"""

from __future__ import annotations

import gzip
import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrdist.data.dataset import IGNORE, Corpus, UtteranceReader, epoch_shards, make_chunks
from asrdist.data.ingest import TOLERANCE, fit_length, map_to_pdfs
from asrdist.data.targets import load_int32_vector
from asrdist.decode.lattice_io import iter_lattices_stream
from asrdist.errors import AsrdistError
from asrdist.kaldi.alignments import alignment_files, read_alignments, read_num_jobs
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model
from asrdist.progress import track
from asrdist.train.lattice_arrays import LatticeArrays, lattice_arrays
from asrdist.train.spilled_arrays import SpilledArrays

log = logging.getLogger(__name__)

# LatticeArrays' arrays and ints as the spilled store keeps them
LATTICE_ARRAYS = {"src": np.int32, "dst": np.int32, "graph": np.float64,
                  "acoustic": np.float64, "bounds": np.int64, "elem_arc": np.int32,
                  "elem_t": np.int32, "elem_tid": np.int32}
LATTICE_INTS = ("start", "final", "frames")


class DenominatorLattices:
    """The lattices of a decode dir (``num_jobs``, ``lat.N.gz``) by utterance, of the
    utterances in ``wanted`` (utterance -> frames: a lattice of other frames is refused),
    spilled to a file in ``spill_dir`` (None: the system temp dir)."""

    def __init__(self, lat_dir: str | Path, wanted: dict[str, int],
                 spill_dir: str | Path | None = None) -> None:
        self.dir = Path(lat_dir)
        files = [self.dir / f"lat.{j}.gz" for j in range(1, read_num_jobs(self.dir) + 1)]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise AsrdistError(f"--denlats {self.dir}: missing {' '.join(missing)}")
        self._store = SpilledArrays(list(LATTICE_ARRAYS.values()), len(LATTICE_INTS),
                                    spill_dir)
        for path in track(files, "read denominator lattices", "file"):
            try:
                with gzip.open(path, "rb") as f:
                    for utt, clat in iter_lattices_stream(f):
                        if utt in wanted:
                            lat = self._checked(utt, clat, wanted[utt], path)
                            self._store.put(utt, [getattr(lat, k) for k in LATTICE_ARRAYS],
                                            [getattr(lat, k) for k in LATTICE_INTS])
            except (OSError, EOFError, ValueError, struct.error) as e:
                raise AsrdistError(f"{path}: not a readable lattice archive "
                                   f"({type(e).__name__}: {str(e)[:100]})") from e

    @staticmethod
    def _checked(utt: str, clat, frames: int, path: Path) -> LatticeArrays:
        try:
            arrays = lattice_arrays(clat)
        except AsrdistError as e:
            raise AsrdistError(f"{path}: lattice {utt}: {e.message}") from e
        if arrays.frames != frames:
            raise AsrdistError(f"{path}: lattice {utt} has {arrays.frames} frames, its features "
                               f"{frames}: lattices of other features?")
        return arrays

    def __contains__(self, utt: str) -> bool:
        return utt in self._store

    def __len__(self) -> int:
        return len(self._store)

    def get(self, utt: str) -> LatticeArrays:
        arrays, ints = self._store.get(utt)
        return LatticeArrays(**dict(zip(LATTICE_ARRAYS, arrays, strict=True)),
                             **dict(zip(LATTICE_INTS, ints, strict=True)))


class Numerators:
    """The numerator transition-ids of every utterance of ``corpus`` that ``ali_dir`` aligns,
    fitted to its frames as ingestion fitted the targets and checked, once, to spell the
    targets' pdfs, spilled to a file in ``spill_dir`` (None: the system temp dir); and
    ``ali_dir``'s transition model."""

    def __init__(self, ali_dir: str | Path, corpus: Corpus,
                 spill_dir: str | Path | None = None) -> None:
        self.dir = Path(ali_dir)
        model = self.dir / "final.mdl"
        if not model.is_file():
            raise AsrdistError(f"--alignments {self.dir}: no final.mdl")
        self.trans: TransitionInfo = read_transition_model(model)
        if self.trans.num_pdfs != corpus.num_pdfs:
            raise AsrdistError(f"{model}: {self.trans.num_pdfs} pdfs, but --targets has "
                               f"{corpus.num_pdfs}: not the alignments the targets came from")
        rows = {u: i for i, u in enumerate(corpus.utts)}
        self._store = SpilledArrays([np.int32], spill_dir=spill_dir)
        fds: dict = {}
        try:
            for path in alignment_files(self.dir):
                for utt, tids in read_alignments(path):
                    if utt in rows:
                        row = rows[utt]
                        fitted = fit_length(tids, int(corpus.num_frames[row]), TOLERANCE, utt)
                        pdfs = map_to_pdfs(fitted, self.trans, utt, path)
                        self._check(utt, pdfs, load_int32_vector(corpus.targets[row], fds))
                        self._store.put(utt, [fitted.astype(np.int32)])
        finally:
            for fd in fds.values():
                fd.close()

    def __contains__(self, utt: str) -> bool:
        return utt in self._store

    def get(self, utt: str) -> np.ndarray:
        """``utt``'s transition-ids."""
        return self._store.get(utt)[0][0]

    def _check(self, utt: str, ours: np.ndarray, targets: np.ndarray) -> None:
        differ = np.flatnonzero(ours != targets)
        if differ.size:
            t = int(differ[0])
            raise AsrdistError(
                f"utterance {utt}: --alignments {self.dir} gives pdf {ours[t]} at frame {t}, "
                f"--targets {targets[t]}: the targets were not ingested from these alignments")


@dataclass
class Utterance:
    """One utterance of a sequence batch: its frames, lattice and numerator."""

    utt: str
    frames: int
    lattice: LatticeArrays
    alignment: np.ndarray  # transition-ids
    pdfs: np.ndarray


@dataclass
class SequenceBatch:
    """Whole utterances cut into chunks with context: ``x`` (chunks, left + chunk_len +
    right, dim); ``keep`` marks each chunk's frames that are the utterance's own (not an
    overlap or padding), so ``logits[keep]`` is every utterance's frames in order."""

    x: torch.Tensor
    keep: torch.Tensor
    utterances: list[Utterance]

    @property
    def frames(self) -> int:
        return sum(u.frames for u in self.utterances)

    def to(self, device: torch.device) -> SequenceBatch:
        return SequenceBatch(self.x.to(device, non_blocking=True),
                             self.keep.to(device, non_blocking=True), self.utterances)


def pack(rows: np.ndarray, num_frames: np.ndarray, budget: int) -> list[np.ndarray]:
    """``rows`` in order, in batches of whole utterances of at least ``budget`` frames each
    (the last, short one dropped, as the chunk batches drop theirs)."""
    batches, start, total = [], 0, 0
    for i, row in enumerate(rows):
        total += int(num_frames[row])
        if total >= budget:
            batches.append(rows[start:i + 1])
            start, total = i + 1, 0
    return batches


class SequenceData:
    """Learner ``rank``'s sequence batches: its shard of each epoch (the chunk trainer's
    deal, :func:`~asrdist.data.dataset.epoch_shards`) packed into whole-utterance batches of
    ``batch_frames`` frames; every learner takes the smallest shard's number."""

    def __init__(self, corpus: Corpus, rows: np.ndarray, heldout: np.ndarray,
                 denlats: str, alignments: str, batch_frames: int, seed: int, rank: int,
                 world_size: int) -> None:
        self.corpus, self.batch_frames = corpus, batch_frames
        self.seed, self.rank, self.world_size = seed, rank, world_size
        wanted = {corpus.utts[r]: int(corpus.num_frames[r]) for r in np.concatenate([rows,
                                                                                   heldout])}
        self.numerators = Numerators(alignments, corpus)
        self.lattices = DenominatorLattices(denlats, wanted)
        usable = [r for r in rows if self._has_both(r)]
        if len(usable) < len(rows):
            log.warning("%d of %d training utterances have no denominator lattice in %s or no "
                        "alignment in %s: left out", len(rows) - len(usable), len(rows),
                        denlats, alignments)
        if not usable:
            raise AsrdistError(f"--denlats {denlats}: no lattice of any training utterance of "
                               "--data (made from another data dir?)")
        self.rows = np.asarray(usable, dtype=np.int64)
        self.heldout = np.asarray([r for r in heldout if self._has_both(r)], dtype=np.int64)
        self._steps: dict[int, int] = {}
        if self.steps(0) == 0:
            raise AsrdistError(f"{len(self.rows)} training utterances with lattices are too few "
                               f"for one step of {batch_frames} frames on each of {world_size} "
                               "learner(s)")

    def _has_both(self, row: int) -> bool:
        """Whether utterance ``row`` has a lattice and a numerator."""
        utt = self.corpus.utts[row]
        return utt in self.lattices and utt in self.numerators

    def _batches(self, epoch: int, rank: int) -> list[np.ndarray]:
        shard = epoch_shards(self.rows, self.seed, epoch, self.world_size)[rank]
        return pack(shard, self.corpus.num_frames, self.batch_frames)

    def steps(self, epoch: int) -> int:
        if epoch not in self._steps:
            self._steps[epoch] = min(len(self._batches(epoch, r)) for r in range(self.world_size))
        return self._steps[epoch]

    def open(self, reader: UtteranceReader, epoch: int, chunk_len: int, left: int,
             right: int) -> UtteranceBatches:
        return UtteranceBatches(self, reader, self._batches(epoch, self.rank), chunk_len,
                                left, right)

    def heldout_batches(self, reader: UtteranceReader, chunk_len: int, left: int,
                        right: int) -> UtteranceBatches:
        """The held-out utterances with lattices, in order, every one of them."""
        batches = pack(self.heldout, self.corpus.num_frames, self.batch_frames)
        done = sum(len(b) for b in batches)
        if done < len(self.heldout):
            batches.append(self.heldout[done:])
        return UtteranceBatches(self, reader, batches, chunk_len, left, right)

    def utterance(self, reader: UtteranceReader, row: int) -> tuple[np.ndarray, Utterance]:
        utt = self.corpus.utts[row]
        feats, pdfs = reader.read(int(row))
        return feats, Utterance(utt, len(pdfs), self.lattices.get(utt),
                                self.numerators.get(utt), pdfs)


class UtteranceBatches:
    """One epoch's batches in order; its state (the batches taken) goes into checkpoints."""

    def __init__(self, data: SequenceData, reader: UtteranceReader, batches: list[np.ndarray],
                 chunk_len: int, left: int, right: int) -> None:
        self.data, self.reader, self.batches = data, reader, batches
        self.chunk_len, self.left, self.right = chunk_len, left, right
        self.cursor = 0

    def __len__(self) -> int:
        return len(self.batches)

    def next_batch(self) -> SequenceBatch:
        if self.cursor >= len(self.batches):
            raise StopIteration
        rows = self.batches[self.cursor]
        self.cursor += 1
        xs, keeps, utterances = [], [], []
        for row in rows:
            feats, utterance = self.data.utterance(self.reader, int(row))
            x, y = make_chunks(feats, utterance.pdfs, self.chunk_len, self.left, self.right)
            xs.append(x)
            keeps.append(y != IGNORE)
            utterances.append(utterance)
        return SequenceBatch(torch.from_numpy(np.concatenate(xs)),
                             torch.from_numpy(np.concatenate(keeps)), utterances)

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = int(state["cursor"])
