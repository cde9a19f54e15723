from __future__ import annotations

import pytest

from asrdist.corpus.voices import SYNTHESIZERS, Voice, voice_of, voices
from asrdist.errors import AsrdistError


def test_each_synthesizer_splits_its_voices_between_train_and_test():
    train, test = voices("train"), voices("test")
    assert [g[0].synth for g in train] == list(SYNTHESIZERS) == [g[0].synth for g in test]
    for train_group, test_group in zip(train, test, strict=True):
        assert len(train_group) >= 2 and len(test_group) >= 1
        assert not {v.name for v in train_group} & {v.name for v in test_group}
    speakers = [v.speaker for g in train + test for v in g]
    assert len(set(speakers)) == len(speakers)
    assert Voice("espeak", "en-us+m1").speaker == "espeak-en-us-m1"
    assert Voice("flite", "slt").speaker == "flite-slt"


def test_synthesizers_take_turns_and_cycle_their_voices():
    groups = voices("train")
    picked = [voice_of(i, groups) for i in range(2 * len(groups[1]))]
    assert [v.synth for v in picked[:4]] == ["espeak", "flite", "espeak", "flite"]
    assert [v.name for v in picked if v.synth == "flite"] == list(SYNTHESIZERS["flite"]["train"])


def test_unknown_synthesizer_is_refused():
    with pytest.raises(AsrdistError, match="--synthesizers festival"):
        voices("train", ("festival",))
