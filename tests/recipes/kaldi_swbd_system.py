"""What a Kaldi user brings to recipes/swbd*: an alignment dir and a graph dir for the
miniature LDC tree, made with the mini machinery (asrdist-align-gmm, asrdist-mkgraph) on the
same utterance ids Kaldi's recipe gives, speed-perturbed copies included when asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from asrdist.corpus.lexicon import build_lexicon
from asrdist.kaldi.data_dir import read_table
from asrdist.kaldi.lang import prepare_lang
from tests.cli_process import run_cli
from tests.corpus.ldc_fixture import LdcTree
from tests.dict_fixture import write_dict


def _check(name: str, *args: str) -> None:
    proc = run_cli(name, *args)
    assert proc.returncode == 0, f"{name}: {proc.stderr[-3000:]}"


@dataclass(frozen=True)
class KaldiSystem:
    ali_dir: Path
    graph_dir: Path
    train_mfcc: Path  # the training set's features (as a user's fMLLR feats.scp would be)
    test_mfcc: Path  # eval2000's


def make_kaldi_system(tree: LdcTree, root: Path, fisher: bool, speed: str = "") -> KaldiSystem:
    """Data prep as the user's Kaldi recipe did it (s5c, or fisher_swbd with ``fisher``), MFCC
    at 8 kHz, monophone GMM alignments of the training set (exp/tri4_ali_nodup's role, or
    fisher_swbd's exp/tri5a_ali_nodup) and a trigram graph (graph_sw1_tg's)."""
    data = root / "data"
    prep = ["--swbd-audio", str(tree.swbd_audio), "--ms98", str(tree.ms98),
            "--eval2000-audio", str(tree.eval2000_audio), "--eval2000-ref",
            str(tree.eval2000_ref), "--dev-utts", "4", "--max-dup", "2", "--out", str(data),
            "--allow-partial"]  # the fixture is a small corpus
    if fisher:
        prep += ["--fisher-audio", str(tree.fisher_audio), "--fisher-text", str(tree.fisher_text)]
    if speed:
        prep += ["--speed-perturb", speed]
    _check("prepare_swbd", *prep)
    train = "train_nodup" + ("_sp" if speed else "")  # s5c's and fisher_swbd's name
    text = read_table(data / train / "text")
    words = {w for t in text.values() for w in t.split()}
    spoken = {w for w in words if not w.startswith("[") and not w.startswith("-")
              and not w.endswith("-")}
    lexicon = {w: list(p[0]) for w, p in build_lexicon(spoken).items()}
    lexicon.update({w: ["SPN"] for w in words - spoken | {"<unk>"}})
    lexicon["!SIL"] = ["SIL"]
    write_dict(root / "dict", lexicon)
    prepare_lang(root / "dict", root / "lang")
    for part in (train, "eval2000"):
        _check("features", "--kind", "mfcc", "--sample-rate", "8000", "--nj", "2",
             str(data / part), str(data / f"{part}_mfcc"))
    ali = root / "exp" / (("tri5a" if fisher else "tri4") + "_ali_nodup" + ("_sp" if speed else ""))
    _check("align_gmm", "--nj", "2", "--num-iters", "5", "--total-gauss", "150",
         str(data / f"{train}_mfcc"), str(root / "lang"), str(ali))
    graph = root / "exp" / "tri4" / "graph_sw1_tg"
    _check("mkgraph", "--lang", str(root / "lang"), "--model", str(ali / "final.mdl"),
         "--text", str(data / train / "text"), "--out", str(graph))
    return KaldiSystem(ali, graph, data / f"{train}_mfcc", data / "eval2000_mfcc")
