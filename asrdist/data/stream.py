"""The epoch stream of a run: what each learner reads in an epoch, and in how many steps.

Every epoch is a new permutation of the utterances, dealt out to the learners; each reads its
shard as chunks through a shuffle buffer, and all take as many steps (the smallest shard
decides), so no learner waits at a collective for one that ran out of data. The trainer and
RBM pretraining read their data through it alike.
"""

from __future__ import annotations

import numpy as np

from asrdist.data.dataset import ChunkStream, Corpus, UtteranceReader, epoch_shards, steps_per_epoch
from asrdist.errors import AsrdistError


class EpochStream:
    """The epochs of learner ``rank`` of ``world_size`` over ``rows`` of ``corpus``.

    ``data`` names the corpus in the error raised when the first epoch has no whole step.
    """

    def __init__(self, corpus: Corpus, rows: np.ndarray, data: str, chunk_len: int,
                 batch_size: int, shuffle_buffer: int, seed: int, rank: int,
                 world_size: int) -> None:
        self.corpus, self.rows = corpus, rows
        self.chunk_len, self.batch_size, self.shuffle_buffer = chunk_len, batch_size, shuffle_buffer
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._steps: dict[int, int] = {}
        if self.steps(0) == 0:
            raise AsrdistError(
                f"{data}: too little data for one step of --batch-size {batch_size} "
                f"chunks of {chunk_len} frames on each of {world_size} learner(s)"
            )

    def steps(self, epoch: int) -> int:
        """The steps every learner takes in ``epoch``."""
        if epoch not in self._steps:
            self._steps[epoch] = steps_per_epoch(self.corpus, self.rows, self.chunk_len,
                                                 self.batch_size, self.seed, epoch,
                                                 self.world_size)
        return self._steps[epoch]

    def open(self, reader: UtteranceReader, epoch: int, left: int, right: int) -> ChunkStream:
        """This learner's batches of ``epoch``: chunks with ``left`` and ``right`` frames of
        context, read through ``reader``."""
        shard = epoch_shards(self.rows, self.seed, epoch, self.world_size)[self.rank]
        return ChunkStream(reader, shard, self.chunk_len, left, right, self.batch_size,
                           self.shuffle_buffer, [self.seed, epoch, self.rank])
