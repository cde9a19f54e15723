"""What one learner trains on: the corpus split into training and held-out utterances, its
shard of each epoch (:class:`~asrdist.data.stream.EpochStream`), and the batches as tensors,
warped and masked (VTLP, SpecAugment), ready for the device.

The trainer's loop only asks for the next batch; everything that depends on the data alone
(its dimension, its pdf count and priors, the steps of every epoch) is settled here, before a
model exists.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from asrdist.data.dataset import (
    IGNORE,
    ChunkStream,
    UtteranceReader,
    check_sample,
    load_corpus,
    split_heldout,
    steps_per_epoch,
)
from asrdist.data.ingest import read_pdf_counts
from asrdist.data.stream import EpochStream
from asrdist.errors import AsrdistError
from asrdist.train.config import TrainConfig
from asrdist.train.priors import log_priors
from asrdist.train.sequence_data import SequenceBatch, SequenceData, UtteranceBatches
from asrdist.train.spec_augment import check_fits, make_spec_augment, mask_generator
from asrdist.train.vtlp import make_vtlp, read_mfcc_config

Batch = tuple[torch.Tensor, torch.Tensor, int]  # features, targets, labelled frames
Augment = Callable[[torch.Tensor], torch.Tensor]


class TrainingData:
    """Learner ``rank`` of ``world_size``'s data for ``cfg``; ``mask_rng`` (SpecAugment's
    generator) and the epochs' step counts are part of a checkpoint's state."""

    def __init__(self, cfg: TrainConfig, rank: int, world_size: int) -> None:
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.corpus = load_corpus(cfg.data, cfg.targets, cfg.max_missing_targets)
        self.train_rows, self.heldout_rows = split_heldout(self.corpus, cfg.heldout_utts,
                                                           cfg.seed)
        self.num_pdfs = self.corpus.num_pdfs
        self.priors = log_priors(read_pdf_counts(cfg.targets, self.num_pdfs))
        probe = UtteranceReader(self.corpus, cfg.cmvn, cfg.cmvn_norm_vars, None)
        self.input_dim = int(probe.read(int(self.train_rows[0]))[0].shape[1])
        check_sample(probe, rank, world_size)
        probe.close()
        check_fits(cfg.mask_options(), self.input_dim)
        self.augments = self._make_augments()
        # sequence training: whole utterances with their lattices, as many frames per step
        # as a chunk batch holds
        self.sequence = SequenceData(
            self.corpus, self.train_rows, self.heldout_rows, cfg.denlats, cfg.alignments,
            cfg.batch_size * cfg.chunk_len, cfg.seed, rank, world_size,
        ) if cfg.objective.sequence else None
        self.epochs = self.sequence or EpochStream(
            self.corpus, self.train_rows, cfg.data, cfg.chunk_len, cfg.batch_size,
            cfg.shuffle_buffer, cfg.seed, rank, world_size)
        self.steps_per_epoch = [self.epochs.steps(e) for e in range(cfg.epochs)]

    def _make_augments(self) -> list[Augment]:
        """The training chunks' transforms, in order: the warp, then the masks (which set
        bands to the chunk's mean, a mean the warp would otherwise smear)."""
        augments = []
        if self.cfg.vtlp_warp:
            mfcc = read_mfcc_config(self.cfg.data, self.input_dim)
            augments.append(make_vtlp(self.cfg.vtlp_warp, mfcc))
        self.mask_rng = mask_generator(self.cfg.seed, self.rank)  # in checkpoints
        masks = make_spec_augment(self.cfg.mask_options(), self.mask_rng)
        return augments + ([masks] if masks is not None else [])

    def reader(self) -> UtteranceReader:
        """A reader of the utterances, normalised as the run says (close it after use)."""
        return UtteranceReader(self.corpus, self.cfg.cmvn, self.cfg.cmvn_norm_vars,
                               self.input_dim)

    def open(self, reader: UtteranceReader, epoch: int, left: int, right: int
             ) -> ChunkStream | UtteranceBatches:
        """This learner's chunk stream of ``epoch`` (``left``/``right``: the model's context),
        or its batches of whole utterances under a sequence objective."""
        if self.sequence is not None:
            return self.sequence.open(reader, epoch, self.cfg.chunk_len, left, right)
        return self.epochs.open(reader, epoch, left, right)

    def batch(self, stream: ChunkStream | UtteranceBatches, pin: bool) -> Batch | SequenceBatch:
        """The next batch of ``stream`` as tensors, transformed (``pin``: in pinned memory, for
        a copy to the GPU that overlaps); a sequence batch as it is (never augmented)."""
        if isinstance(stream, UtteranceBatches):
            return stream.next_batch()
        xy = stream.next_batch()
        x, y = torch.from_numpy(xy[0]), torch.from_numpy(xy[1])
        for augment in self.augments:
            x = augment(x)
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        return x, y, int((xy[1] != IGNORE).sum())

    def chunks_in_epoch(self, epoch: int) -> int:
        """The chunks of the smallest shard of ``epoch`` (a --resume that changes
        --batch-size mid-epoch counts its steps from them)."""
        if self.sequence is not None:
            raise AsrdistError("--resume-allow batch_size: a sequence-training run resumes "
                               "with its own --batch-size")
        return steps_per_epoch(self.corpus, self.train_rows, self.cfg.chunk_len, 1,
                               self.cfg.seed, epoch, self.world_size)
