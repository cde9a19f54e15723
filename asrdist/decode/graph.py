"""Decoding graphs: G from an ARPA n-gram, then HCLG as Kaldi's utils/mkgraph.sh makes it.

    G    = arpa2fst(lm.arpa)                                   (kaldilm; #0 on backoff arcs)
    LG   = minimize_encoded(determinize_star(L_disambig o G))
    CLG  = compose_context(LG)                                (context width from the tree)
    HCLGa= minimize_encoded(rm_disambig(determinize_star(H o CLG)))
    HCLG = add_self_loops(HCLGa)                              (self-loop scale 0.1, as mkgraph)

The graph dir holds what Kaldi's does (HCLG.fst, words.txt, phones.txt, phones/, num_pdfs,
disambig_tid.int) plus a copy of the model's TransitionModel as final.mdl, so that decoding
needs only the graph dir and the acoustic model. A Kaldi graph dir works as is: HCLG.fst may
be an OpenFst ``vector`` or ``const`` FST (Kaldi's mkgraph.sh writes const).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst/kaldilm, or the process hangs
import kaldifst
import kaldilm
import numpy as np

from asrdist.decode.lm import NgramLM, read_training_text
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write
from asrdist.hmm.transitions import khg_topology, khg_transition_model
from asrdist.hmm.tree import monophone_tree, read_tree
from asrdist.kaldi.final_mdl import write_final_mdl
from asrdist.kaldi.lang import Lang
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "mkgraph"

_FST_MAGIC = 2125659606
_NON_WORDS = {"<eps>", "#0", "<s>", "</s>"}


# ---- reading ------------------------------------------------------------------------------


def _fst_type(path: Path) -> str:
    """The FST type string of an OpenFst binary file's header (``vector``, ``const``, ...)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if len(head) < 8 or struct.unpack_from("<i", head)[0] != _FST_MAGIC:
        raise AsrdistError(f"{path}: not an OpenFst binary FST")
    (n,) = struct.unpack_from("<i", head, 4)
    return head[8:8 + n].decode("ascii", "replace")


def _read_const_fst(path: Path) -> kaldifst.StdVectorFst:
    """Read a ``const`` FST (what Kaldi's mkgraph.sh writes), which kaldifst cannot read.

    Layout (OpenFst ConstFst): header, then the arrays of states (final weight, first arc,
    #arcs, #input-eps, #output-eps) and arcs (ilabel, olabel, weight, nextstate); file
    version 2 packs them, version 1 aligns each array to 16 bytes.
    """
    data = path.read_bytes()
    pos = 4
    for _ in range(2):  # fst type, arc type
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4 + n
    version, flags, _props, start, num_states, num_arcs = struct.unpack_from("<iiQqqq", data, pos)
    pos += 40
    if version not in (1, 2) or flags & 3:
        raise AsrdistError(f"{path}: unsupported const FST (version {version}, flags {flags})")
    align = 16 if version == 1 else 1
    pos = (pos + align - 1) // align * align
    states = np.frombuffer(data, dtype=np.dtype([("final", "<f4"), ("pos", "<u4"), (
        "narcs", "<u4"), ("nieps", "<u4"), ("noeps", "<u4")]), count=num_states, offset=pos)
    pos += states.nbytes
    pos = (pos + align - 1) // align * align
    arcs = np.frombuffer(data, dtype=np.dtype([("i", "<i4"), ("o", "<i4"), ("w", "<f4"), (
        "n", "<i4")]), count=num_arcs, offset=pos)
    src = np.repeat(np.arange(num_states), states["narcs"].astype(np.int64)).tolist()
    finals = np.nonzero(np.isfinite(states["final"]))[0].tolist()
    arc_lines = [f"{s}\t{n}\t{i}\t{o}\t{w!r}"
                 for s, (i, o, w, n) in zip(src, arcs.tolist(), strict=True)]
    final_lines = [f"{s}\t{float(states['final'][s])!r}" for s in finals]
    # A text FST starts at the first line's source state: put the start state's lines first.
    lines = sorted(arc_lines + final_lines, key=lambda line: int(line.split("\t")[0]) != start)
    fst = kaldifst.compile("\n".join(lines) + "\n", keep_state_numbering=True)
    return fst


def read_fst(path: str | os.PathLike) -> kaldifst.StdVectorFst:
    """Read a binary FST, vector or const."""
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"{path}: no such FST")
    kind = _fst_type(path)
    if kind == "const":
        return _read_const_fst(path)
    if kind != "vector":
        raise AsrdistError(f"{path}: FST type {kind!r} is not supported (vector or const)")
    fst = kaldifst.StdVectorFst.read(str(path))
    if fst is None:
        raise AsrdistError(f"{path}: cannot read FST")
    return fst


# ---- building -----------------------------------------------------------------------------


def _remove_disambig_ilabels(fst: kaldifst.StdVectorFst, disambig: set[int]) -> None:
    """fstrmsymbols on the input side: disambiguation transition-ids become epsilon."""
    for s in range(fst.num_states):
        arcs = list(kaldifst.ArcIterator(fst, s))
        if not any(a.ilabel in disambig for a in arcs):
            continue
        fst.delete_arcs(s, len(arcs))
        for a in arcs:
            ilabel = 0 if a.ilabel in disambig else a.ilabel
            fst.add_arc(s, kaldifst.StdArc(ilabel, a.olabel, a.weight, a.nextstate))


def compile_hclg(
    lg_inputs: tuple[kaldifst.StdVectorFst, kaldifst.StdVectorFst],
    disambig_phones: list[int],
    tree: khg.ContextDependency,
    trans_model: khg.TransitionModel,
    self_loop_scale: float = 0.1,
    transition_scale: float = 1.0,
) -> tuple[kaldifst.StdVectorFst, list[int]]:
    """HCLG from (L_disambig, G), the tree and the transition model; also the disambig tids."""
    lexicon, grammar = lg_inputs
    kaldifst.arcsort(lexicon, sort_type="olabel")
    kaldifst.arcsort(grammar, sort_type="ilabel")
    lg = kaldifst.compose(lexicon, grammar)
    kaldifst.determinize_star(lg, use_log=True)
    kaldifst.minimize_encoded(lg)
    clg, ilabels = kaldifst.compose_context(
        disambig_phones, tree.context_width, tree.central_position, lg
    )
    kaldifst.arcsort(clg, sort_type="ilabel")
    h, disambig_tids = khg.get_h_transducer(
        ilabels, tree, trans_model, khg.HTransducerConfig(transition_scale=transition_scale)
    )
    kaldifst.arcsort(h, sort_type="olabel")
    hclg = kaldifst.compose(h, clg)
    kaldifst.determinize_star(hclg, use_log=True)
    _remove_disambig_ilabels(hclg, set(disambig_tids))
    kaldifst.rmepsilon(hclg)
    kaldifst.minimize_encoded(hclg)
    hclg = khg.add_self_loops(
        self_loop_scale=self_loop_scale, disambig_syms=[], reorder=True,
        trans_model=trans_model, ifst=hclg,
    )
    kaldifst.arcsort(hclg, sort_type="ilabel")
    if hclg.num_states == 0:
        raise AsrdistError("HCLG is empty: the grammar and the lexicon share no word sequence")
    return hclg, list(disambig_tids)


def estimate_lm(lang: Lang, train_text: str | os.PathLike, order: int,
                arpa: str | os.PathLike) -> NgramLM:
    """An n-gram over the lang's words, estimated on ``train_text`` and written as ARPA."""
    vocab = {w for w in lang.words if w not in _NON_WORDS and not w.startswith("#")}
    lm = NgramLM(read_training_text(train_text, vocab, lang.oov), vocab, order)
    lm.write_arpa(arpa)
    return lm


def make_graph(
    lang_dir: str | os.PathLike,
    model: str | os.PathLike,
    train_text: str | os.PathLike,
    out_dir: str | os.PathLike,
    order: int = 3,
    tree_path: str | os.PathLike | None = None,
    self_loop_scale: float = 0.1,
    command: str = "",
) -> Path | Skipped:
    """Build ``out_dir`` (lm.arpa, G.fst, HCLG.fst, ..., log/mkgraph.log holding ``command``)
    unless it is done with the same options and inputs (asrdist.stage): the lang dir, the
    model, the tree and the text.

    The tree is ``tree_path``, else the ``tree`` beside the model, else a monophone tree made
    from the lang's phones/sets.int as gmm-init-mono does (checked against the model).
    """
    out = Path(out_dir)
    if tree_path is not None and not Path(tree_path).is_file():
        raise AsrdistError(f"{tree_path}: no such tree (--tree)")
    tree_path = Path(tree_path) if tree_path else Path(model).parent / "tree"
    check = check_done(out, STAGE, {"order": order, "self_loop_scale": self_loop_scale},
                       [lang_dir, model, tree_path, train_text])
    if check.done:
        return check.skipped()
    out.mkdir(parents=True, exist_ok=True)
    lang = Lang.load(Path(lang_dir))
    info = read_transition_model(model)
    if tree_path.is_file():
        tree = read_tree(tree_path)
    else:
        log.info("%s missing: using a monophone tree from phones/sets.int", tree_path)
        tree = monophone_tree(khg_topology(info), lang.phone_sets)
    trans_model = khg_transition_model(info, tree, model)

    estimate_lm(lang, train_text, order, out / "lm.arpa")
    with atomic_path(out / "G.fst") as tmp:
        kaldilm.arpa2fst(str(out / "lm.arpa"), str(tmp), disambig_symbol="#0",
                         read_symbol_table=str(lang.path / "words.txt"), max_arpa_warnings=0)
    hclg, disambig_tids = compile_hclg(
        (read_fst(lang.path / "L_disambig.fst"), read_fst(out / "G.fst")),
        lang.disambig, tree, trans_model, self_loop_scale,
    )
    with atomic_path(out / "HCLG.fst") as tmp:
        if not hclg.write(str(tmp)):
            raise AsrdistError(f"{out / 'HCLG.fst'}: cannot write")
    for name in ("words.txt", "phones.txt"):
        shutil.copyfile(lang.path / name, out / name)
    shutil.copytree(lang.path / "phones", out / "phones", dirs_exist_ok=True)
    write_final_mdl(out / "final.mdl", info)
    with atomic_write(out / "num_pdfs") as f:
        f.write(f"{info.num_pdfs}\n")
    with atomic_write(out / "disambig_tid.int") as f:
        f.write("".join(f"{t}\n" for t in disambig_tids))
    with atomic_write(out / "log" / "mkgraph.log") as f:  # the report shows how it was made
        f.write(f"# {command or 'asrdist-mkgraph'}\n")
    check.mark_done()
    log.info("%s: HCLG with %d states over %d words, %d pdfs", out, hclg.num_states,
             sum(1 for w in lang.words if w not in _NON_WORDS), info.num_pdfs)
    return out
