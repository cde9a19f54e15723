"""Word start times and durations from a decoded frame alignment, for the CTM."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import TransitionInfo


def _tid_kinds(trans: TransitionInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per transition-id: does it leave the phone (final), is it a self-loop, its state."""
    final, loop, state = [False], [False], [0]
    for tstate, (phone, hmm_state, _f, _s) in enumerate(trans.tuples, 1):
        entry = trans.topology.entry(phone)
        for dest, _prob in entry[hmm_state].transitions:
            final.append(dest == len(entry) - 1)
            loop.append(dest == hmm_state)
            state.append(tstate)
    return np.array(final), np.array(loop), np.array(state)


class WordAligner:
    """Word start/duration from a frame alignment, as lattice-align-words-lexicon does.

    Splits the alignment into phones (a phone ends with its final transition, plus the
    self-loops that reordered graphs put after it), then matches the phones against the
    pronunciations of the hypothesis words, allowing optional-silence entries (the
    ``<eps>`` lines of phones/align_lexicon.int) between words.
    """

    def __init__(self, trans: TransitionInfo, align_lexicon: list[list[int]]):
        self.trans = trans
        self.is_final, self.is_loop, self.tid_state = _tid_kinds(trans)
        self.prons: dict[int, set[tuple[int, ...]]] = {}
        for row in align_lexicon:
            if len(row) < 3 or row[0] != row[1]:
                raise AsrdistError(f"align_lexicon.int: bad line {row}")
            self.prons.setdefault(row[0], set()).add(tuple(row[2:]))

    def phones(self, alignment: Sequence[int]) -> list[tuple[int, int, int]]:
        """(phone, first frame, number of frames) segments."""
        out, start, t, n = [], 0, 0, len(alignment)
        tid_state, tid_phone = self.tid_state, self.trans.tid_to_phone
        while t < n:
            tid = alignment[t]
            t += 1
            if self.is_final[tid]:
                while t < n and self.is_loop[alignment[t]] and \
                        tid_state[alignment[t]] == tid_state[tid]:
                    t += 1
                out.append((int(tid_phone[tid]), start, t - start))
                start = t
        if start < n:  # a partial path may stop inside a phone
            out.append((int(tid_phone[alignment[start]]), start, n - start))
        return out

    def align(
        self, alignment: Sequence[int], words: Sequence[int]
    ) -> list[tuple[int, int, int]] | None:
        """(word, first frame, frames) per word, or None when the phones do not spell them."""
        segs = self.phones(alignment)
        phones = tuple(p for p, _, _ in segs)
        silences = self.prons.get(0, set())
        # Breadth-first over (phones used, words used); back-pointers rebuild the path.
        back: dict[tuple[int, int], tuple[tuple[int, int], int | None]] = {(0, 0): ((-1, -1), None)}
        frontier = [(0, 0)]
        goal = (len(phones), len(words))
        while frontier and goal not in back:
            nxt = []
            for pi, wi in frontier:
                moves = [(pron, None) for pron in silences]
                if wi < len(words):
                    moves += [(pron, words[wi]) for pron in self.prons.get(words[wi], ())]
                for pron, word in moves:
                    if phones[pi:pi + len(pron)] == pron:
                        state = (pi + len(pron), wi + (word is not None))
                        if state not in back:
                            back[state] = ((pi, wi), word)
                            nxt.append(state)
            frontier = nxt
        if goal not in back:
            return None
        out = []
        state = goal
        while state != (0, 0):
            prev, word = back[state]
            if word is not None:
                first = segs[prev[0]]
                last = segs[state[0] - 1]
                out.append((word, first[1], last[1] + last[2] - first[1]))
            state = prev
        return out[::-1]
