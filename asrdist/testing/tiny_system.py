"""A tiny ASR system made on the spot: lang, monophone model, graph, and test data whose
acoustic scores clearly spell known sentences (for the GMM and for a one-layer "network").
The decoding tests and the probes (bench/probes/errors.py) share it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldiio
import numpy as np
import torch

from asrdist.hmm.tree import monophone_tree, write_tree
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.kaldi.lang import Lang, prepare_lang
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.final import Exported, write_final
from asrdist.testing.dict_dir import write_dict

LEXICON = {"<unk>": ["SPN"], "cat": ["K", "AE", "T"], "dog": ["D", "O", "G"],
           "sat": ["S", "AE", "T"], "sit": ["S", "IH", "T"], "on": ["O", "N"]}
TRAIN_TEXT = ["cat sat", "dog sat", "cat sit", "dog sit on cat", "dog sat on dog"]
STATIC_DIM = 13


@dataclass
class TinySystem:
    root: Path
    lang: Path
    mono: Path  # a Kaldi-style model dir: final.mdl (with GMMs) and tree
    train_text: Path
    trans: TransitionInfo
    means: np.ndarray  # pdf -> static feature mean

    def pdf_frames(self, sentence: str, frames_per_state: int = 3) -> list[int]:
        """The pdf of every frame of SIL + the words' phones + SIL."""
        phones = {s.split()[0]: int(s.split()[1])
                  for s in (self.lang / "phones.txt").read_text().splitlines()}
        pdf_of = {(p, s): f for p, s, f, _ in self.trans.tuples}
        states = {p: 1 + max(s for q, s in pdf_of if q == p) for p, _ in pdf_of}
        seq = ["SIL"] + [p for w in sentence.split() for p in LEXICON[w]] + ["SIL"]
        return [pdf_of[(phones[ph], s)] for ph in seq for s in range(states[phones[ph]])
                for _ in range(frames_per_state)]


def make_system(root: Path) -> TinySystem:
    """Lang dir, monophone tree + transition model + one-Gaussian GMMs, training text."""
    root.mkdir(parents=True, exist_ok=True)
    lang_dir = root / "lang"
    prepare_lang(write_dict(root / "dict", LEXICON), lang_dir)
    lang = Lang.load(lang_dir)
    topo = lang.topology()
    tree = monophone_tree(topo, lang.phone_sets)
    tm = khg.TransitionModel(tree, topo)
    rng = np.random.default_rng(0)
    means = rng.normal(0.0, 4.0, size=(tree.num_pdfs, STATIC_DIM)).astype(np.float32)
    am = khg.AmDiagGmm()
    for pdf in range(tree.num_pdfs):
        gmm = khg.DiagGmm(1, 3 * STATIC_DIM)
        gmm.set_weights(np.ones(1, dtype=np.float32))
        mean = np.concatenate([means[pdf], np.zeros(2 * STATIC_DIM, dtype=np.float32)])
        # deltas carry no information here: very wide Gaussians on them
        inv_var = np.concatenate([np.ones(STATIC_DIM), np.full(2 * STATIC_DIM, 1e-3)])
        gmm.set_invvars_and_means(inv_var.astype(np.float32)[None], mean[None])
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    am.compute_gconsts()
    mono = root / "mono"
    mono.mkdir()
    write_final_mdl(mono / "final.mdl", tm, am)
    write_tree(mono / "tree", tree)
    train_text = root / "train_text"
    train_text.write_text("".join(f"tr{i} {s}\n" for i, s in enumerate(TRAIN_TEXT)))
    return TinySystem(root, lang_dir, mono, train_text,
                      read_transition_model(mono / "final.mdl"), means)


def write_test_data(system: TinySystem, data_dir: Path, sentences: dict[str, str],
                    kind: str) -> None:
    """A Kaldi data dir whose features spell ``sentences``.

    kind "gmm": 13-dim features at each pdf's GMM mean (zero CMVN stats, so CMN is a no-op);
    kind "nnet": one-hot features of the pdf, decoded by :func:`write_identity_nnet`'s model.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    feats = {}
    for utt, sentence in sentences.items():
        pdfs = system.pdf_frames(sentence)
        if kind == "gmm":
            feats[utt] = system.means[pdfs]
        else:
            feats[utt] = (8.0 * np.eye(system.trans.num_pdfs, dtype=np.float32))[pdfs]
    utts = sorted(sentences)
    kaldiio.save_ark(str(data_dir / "feats.ark"), {u: feats[u] for u in utts},
                     scp=str(data_dir / "feats.scp"))
    spk = {u: u.split("-")[0] for u in utts}
    dim = next(iter(feats.values())).shape[1]
    stats = np.zeros((2, dim + 1))
    stats[0, -1] = 1.0
    stats[1, :-1] = 1.0
    kaldiio.save_ark(str(data_dir / "cmvn.ark"), {s: stats for s in sorted(set(spk.values()))},
                     scp=str(data_dir / "cmvn.scp"))
    (data_dir / "text").write_text("".join(f"{u} {sentences[u]}\n" for u in utts))
    (data_dir / "utt2spk").write_text("".join(f"{u} {spk[u]}\n" for u in utts))
    (data_dir / "frame_shift").write_text("0.01\n")


def write_identity_nnet(system: TinySystem, path: Path, num_pdfs: int | None = None,
                        feats_config: dict | None = None) -> None:
    """A final.pt whose network maps a one-hot pdf feature to that pdf's logit (with
    ``num_pdfs`` outputs, the system's by default), trained as if on features made as
    ``feats_config`` says (None: not recorded)."""
    n = system.trans.num_pdfs
    outputs = n if num_pdfs is None else num_pdfs
    config = ModelConfig(type="dnn", splice=0, hidden_layers=0)
    model = build_model(config, n, outputs)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.net[-1].weight.copy_(torch.eye(outputs, n))
    write_final(path, model, Exported(config, input_dim=n, num_pdfs=outputs,
                                      log_priors=np.full(outputs, -np.log(outputs)),
                                      feats_config=feats_config))
