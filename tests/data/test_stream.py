"""The epoch stream: the learners share out each epoch's utterances and take as many steps;
too little data for one step is refused, naming the corpus."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.data.dataset import UtteranceReader, load_corpus
from asrdist.data.stream import EpochStream
from asrdist.errors import AsrdistError
from asrdist.testing import make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    data, targets = make_corpus(tmp_path_factory.mktemp("corpus"))
    return str(data), load_corpus(data, targets)


def _stream(corpus, rank: int, world_size: int, batch_size: int = 4) -> EpochStream:
    data, c = corpus
    return EpochStream(c, np.arange(len(c.utts)), data, chunk_len=8, batch_size=batch_size,
                       shuffle_buffer=16, seed=3, rank=rank, world_size=world_size)


def test_every_learner_takes_as_many_steps_each_epoch_and_reads_them(corpus):
    streams = [_stream(corpus, r, 2) for r in range(2)]
    reader = UtteranceReader(corpus[1], "spk", False, None)
    try:
        for epoch in range(3):
            steps = streams[0].steps(epoch)
            assert steps > 0 and streams[1].steps(epoch) == steps
            for s in streams:
                stream = s.open(reader, epoch, 1, 1)
                for _ in range(steps):
                    x, y = stream.next_batch()
                    assert x.shape[:2] == (4, 10) and y.shape == (4, 8)
    finally:
        reader.close()


def test_too_little_data_for_one_step_names_the_corpus(corpus):
    with pytest.raises(AsrdistError, match=r"too little data for one step of --batch-size "
                                           r"100000 chunks of 8 frames on each of 2 learner"):
        _stream(corpus, 0, 2, batch_size=100000)
