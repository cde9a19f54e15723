"""A tiny synthetic corpus for GMM tests: a dict, a lang dir and an MFCC-like data dir.

Each HMM state of each phone emits a well-separated Gaussian (13 dims), speakers add an
offset that per-speaker CMN removes, and state durations vary, so a flat start must learn
where the phones are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrdist.kaldi.lang import prepare_lang
from asrdist.testing.dict_dir import write_dict

DIM = 13
LEXICON = {"<unk>": ["SPN"], "a": ["A"], "b": ["B"], "c": ["C"], "ba": ["B", "A"],
           "cab": ["C", "A", "B"]}
STATES = {"SIL": 5, "SPN": 5, "A": 3, "B": 3, "C": 3}


@dataclass
class Corpus:
    data: Path
    lang: Path
    true_phones: dict[str, list[str]]  # per utterance, the phone of every frame
    scales: dict[str, np.ndarray]  # per speaker, the factor of each dimension


def make_corpus(root: Path, num_utts: int = 20, seed: int = 0,
                coarticulation: float = 0.0, speaker_scale: float = 0.0) -> Corpus:
    """Write root/lang and root/data (feats.scp, cmvn.scp, text, utt2spk, ...).

    ``coarticulation`` > 0 shifts the first HMM state of every phone by that much times a
    direction its left neighbour owns: a context a triphone tree can learn and a monophone
    cannot. ``speaker_scale`` > 0 scales each speaker's dimensions by exp(that times a normal
    draw): a difference per-speaker CMN leaves and fMLLR can undo (``Corpus.scales``)."""
    rng = np.random.default_rng(seed)
    other = np.random.default_rng(seed + 1)  # leaves rng's draws as they were
    direction = {p: other.normal(0.0, 1.0, size=DIM) for p in STATES}
    warp = np.random.default_rng(seed + 2)
    scales = {f"spk{k}": np.exp(speaker_scale * warp.normal(size=DIM)) for k in range(3)}
    prepare_lang(write_dict(root / "dict", LEXICON), root / "lang")
    means = {p: rng.normal(0.0, 4.0, size=(n, DIM)) for p, n in STATES.items()}
    means["SIL"][:] = means["SIL"][0]  # silence: one sound in every state
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    words = [w for w in LEXICON if w != "<unk>"]
    feats, texts, utt2spk, truth = {}, {}, {}, {}
    for i in range(num_utts):
        spk = f"spk{i % 3}"
        utt = f"{spk}-utt{i:03d}"
        text = list(rng.choice(words, size=rng.integers(2, 5)))
        phones = ["SIL"]
        for w in text:
            phones += LEXICON[w]
            if rng.random() < 0.3:
                phones.append("SIL")
        phones.append("SIL")
        frames, truth[utt] = [], []
        for k, p in enumerate(phones):
            for s in range(STATES[p]):
                n = int(rng.integers(2, 6))
                mean = means[p][s]
                if s == 0 and k > 0 and p != "SIL":
                    mean = mean + coarticulation * direction[phones[k - 1]]
                frames.append(mean + rng.normal(0.0, 1.0, size=(n, DIM)))
                truth[utt] += [p] * n
        offset = np.full(DIM, 3.0 * (i % 3))
        feats[utt] = (np.concatenate(frames) * scales[spk] + offset).astype(np.float32)
        texts[utt] = " ".join(text)
        utt2spk[utt] = spk
    utts = sorted(feats)
    kaldiio.save_ark(str(data / "feats.ark"), {u: feats[u] for u in utts},
                     scp=str(data / "feats.scp"))
    spks = sorted(set(utt2spk.values()))
    stats = {}
    for spk in spks:
        m = np.concatenate([feats[u] for u in utts if utt2spk[u] == spk]).astype(np.float64)
        st = np.zeros((2, DIM + 1))
        st[0, :DIM], st[0, DIM] = m.sum(0), m.shape[0]
        st[1, :DIM] = (m * m).sum(0)
        stats[spk] = st
    kaldiio.save_ark(str(data / "cmvn.ark"), stats, scp=str(data / "cmvn.scp"))
    (data / "text").write_text("".join(f"{u} {texts[u]}\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {utt2spk[u]}\n" for u in utts))
    (data / "spk2utt").write_text("".join(
        f"{s} {' '.join(u for u in utts if utt2spk[u] == s)}\n" for s in spks))
    (data / "utt2num_frames").write_text("".join(f"{u} {feats[u].shape[0]}\n" for u in utts))
    return Corpus(data, root / "lang", truth, scales)
