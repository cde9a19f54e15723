"""What an alignment says per frame: which phone instance, HMM state and transition it is in.

Tree statistics (acc-tree-stats) and alignment conversion to a new tree (convert-ali) both need
the frames split into phone instances (Kaldi's SplitToPhones: a phone ends on the frame whose
transition enters its HMM's final state, and the self-loops right after it when the graph had
its self-loops reordered, as training graphs do) with each frame's HMM state, pdf-class and
transition index inside its transition state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import TransitionInfo


@dataclass(frozen=True)
class TransitionTable:
    """Per transition-id (index 0 unused): its transition state (1-based), phone, HMM state,
    pdf-class, index among its state's transitions, whether it enters the final state and
    whether it is a self-loop."""

    tstate: np.ndarray
    phone: np.ndarray
    hmm_state: np.ndarray
    pdf_class: np.ndarray
    index: np.ndarray
    ends_phone: np.ndarray
    self_loop: np.ndarray

    @classmethod
    def of(cls, info: TransitionInfo) -> TransitionTable:
        cols: list[list[int]] = [[0], [0], [0], [-1], [0], [0], [0]]
        for tstate, (phone, hmm_state, _fwd, _loop) in enumerate(info.tuples, 1):
            entry = info.topology.entry(phone)
            state = entry[hmm_state]
            final = len(entry) - 1
            for index, (dest, _prob) in enumerate(state.transitions):
                loop = dest == hmm_state
                pdf_class = state.self_loop_pdf_class if loop else state.forward_pdf_class
                for col, v in zip(cols, (tstate, phone, hmm_state, pdf_class, index,
                                         int(dest == final), int(loop)), strict=True):
                    col.append(v)
        arrays = [np.asarray(c, dtype=np.int32) for c in cols]
        return cls(*arrays[:5], arrays[5].astype(bool), arrays[6].astype(bool))


@dataclass(frozen=True)
class PhoneSegments:
    """One utterance's phone instances: ``phones[i]`` spans frames ``starts[i]:ends[i]``."""

    phones: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def frame_instance(self) -> np.ndarray:
        """The phone instance of every frame."""
        return np.repeat(np.arange(len(self.phones)), self.ends - self.starts)

    def context(self, width: int, central: int) -> np.ndarray:
        """(instances, width) phones of each instance's context window, 0 past either end."""
        n = len(self.phones)
        padded = np.concatenate([np.zeros(central, np.int32), self.phones,
                                 np.zeros(width - 1 - central, np.int32)])
        return np.stack([padded[k:k + n] for k in range(width)], axis=1)


def split_to_phones(table: TransitionTable, tids: np.ndarray, utt: str) -> PhoneSegments:
    """Phone instances of an alignment; one that does not end in a final state is refused."""
    if len(tids) == 0 or tids.min() < 1 or tids.max() >= len(table.phone):
        raise AsrdistError(f"utterance {utt}: alignment has transition-ids outside the model")
    ends = np.flatnonzero(table.ends_phone[tids]) + 1
    for i, end in enumerate(ends):  # reordered self-loops after the final transition
        while end < len(tids) and table.self_loop[tids[end]] \
                and table.tstate[tids[end]] == table.tstate[tids[end - 1]]:
            end += 1
        ends[i] = end
    if len(ends) == 0 or ends[-1] != len(tids):
        raise AsrdistError(f"utterance {utt}: alignment does not end at the end of a phone")
    starts = np.concatenate([[0], ends[:-1]])
    phones = table.phone[tids[starts]]
    if np.any(table.phone[tids] != np.repeat(phones, ends - starts)):
        raise AsrdistError(f"utterance {utt}: alignment changes phone inside a phone's HMM")
    return PhoneSegments(phones.astype(np.int32), starts, ends)
