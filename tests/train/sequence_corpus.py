"""A corpus for sequence training made on the spot from the tiny decoding system
(:mod:`asrdist.testing.tiny_system`): noisy one-hot features of known sentences, their
transition-id alignments as a Kaldi ali dir (with the system's final.mdl), the ingested
targets, and the graph that denominator lattices are searched in."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.data.ingest import ingest_alignments
from asrdist.decode.graph import make_graph
from asrdist.kaldi.alignments import write_alignments
from asrdist.testing.tiny_system import LEXICON, TinySystem, make_system

WORDS = [w for w in LEXICON if w != "<unk>"]
FRAMES_PER_STATE = 3


@dataclass
class SequenceCorpus:
    system: TinySystem
    data: Path  # features: feats.scp, utt2spk, text
    ali: Path  # ali.1.gz, num_jobs, final.mdl
    targets: Path  # ingested pdf targets
    graph: Path


def _tids(system: TinySystem, sentence: str) -> np.ndarray:
    """SIL, the words' phones, SIL: each HMM state FRAMES_PER_STATE frames (self-loops, then
    the transition to the next state)."""
    phones = {s.split()[0]: int(s.split()[1])
              for s in (system.lang / "phones.txt").read_text().splitlines()}
    first_tid, tid = {}, 1
    for tstate, (phone, state, _, _) in enumerate(system.trans.tuples):
        first_tid[(phone, state)] = tid
        tid += len(system.trans.topology.entry(phone)[state].transitions)
        del tstate
    out = []
    for name in ["SIL"] + [p for w in sentence.split() for p in LEXICON[w]] + ["SIL"]:
        phone = phones[name]
        entry = system.trans.topology.entry(phone)
        for state in range(len(entry) - 1):
            dests = [d for d, _ in entry[state].transitions]
            loop = first_tid[(phone, state)] + dests.index(state)
            forward = first_tid[(phone, state)] + dests.index(state + 1)
            out += [loop] * (FRAMES_PER_STATE - 1) + [forward]
    return np.asarray(out, dtype=np.int32)


def make_sequence_corpus(root: Path, utterances: int = 24, noise: float = 1.5,
                         seed: int = 0) -> SequenceCorpus:
    """``utterances`` random sentences of 2-4 words, features one-hot of each frame's pdf
    (scale 4) plus Gaussian ``noise``: a network learns them well but not perfectly."""
    system = make_system(root / "sys")
    rng = np.random.default_rng(seed)
    sentences = {f"spk{i % 3}-u{i:03d}": " ".join(rng.choice(WORDS, rng.integers(2, 5)))
                 for i in range(utterances)}
    data, ali = root / "train", root / "ali"
    data.mkdir()
    ali.mkdir()
    n = system.trans.num_pdfs
    alignments, feats = {}, {}
    for utt, sentence in sorted(sentences.items()):
        tids = _tids(system, sentence)
        alignments[utt] = tids
        onehot = 4.0 * np.eye(n, dtype=np.float32)[system.trans.tid_to_pdf[tids]]
        feats[utt] = onehot + rng.normal(0, noise, onehot.shape).astype(np.float32)
    kaldiio.save_ark(str(data / "feats.ark"), feats, scp=str(data / "feats.scp"))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in sorted(feats)))
    (data / "text").write_text("".join(f"{u} {sentences[u]}\n" for u in sorted(feats)))
    (data / "utt2num_frames").write_text("".join(f"{u} {len(f)}\n"
                                                 for u, f in sorted(feats.items())))
    (data / "frame_shift").write_text("0.01\n")
    write_alignments(ali / "ali.1.gz", sorted(alignments.items()))
    (ali / "num_jobs").write_text("1\n")
    shutil.copy(system.mono / "final.mdl", ali / "final.mdl")
    targets = root / "targets"
    ingest_alignments(ali, data / "feats.scp", targets)
    graph = make_graph(system.lang, system.mono / "final.mdl", data / "text", root / "graph",
                       order=1)
    return SequenceCorpus(system, data, ali, targets, graph)
