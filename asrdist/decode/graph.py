"""Decoding graphs: G from an ARPA n-gram, then HCLG as Kaldi's utils/mkgraph.sh makes it.

    G    = arpa2fst(lm.arpa)                                   (kaldilm; #0 on backoff arcs)
           or a hand-written grammar (OpenFst text over words.txt, fstcompile's job)
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
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import kaldi_hmm_gmm as khg  # before kaldifst/kaldilm, or the process hangs
import kaldifst
import kaldilm
import numpy as np

from asrdist.decode.lm import NgramLM, read_training_text
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write, copy_file
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
#
# kaldifst reads only ``vector`` files (its Fst::Read knows no ``const``). A const FST (what
# Kaldi's mkgraph.sh writes) is streamed instead: a child process reads its arrays with numpy
# and writes them in the vector layout into a pipe, which kaldifst reads in C++ (the read holds
# the GIL, so the writer cannot be a thread). No text, no temporary file, and the only copy of
# the graph in the reading process is the one it keeps.

_CONST_STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"),
                         ("nieps", "<u4"), ("noeps", "<u4")])
_ARC = np.dtype([("i", "<i4"), ("o", "<i4"), ("w", "<f4"), ("n", "<i4")])
_HAS_SYMBOLS, _IS_ALIGNED = 0x3, 0x4  # FstHeader flags
_MUTABLE_EXPANDED = 0x3  # kMutable | kExpanded: what a vector FST's properties must hold
_CHUNK_STATES = 1 << 18  # states converted at a time (their arcs: a few MB)
_CHUNK_BYTES = 16 << 20  # bytes of a vector file read at a time
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FstHeader:
    """An OpenFst binary file's header; ``size``: its length in bytes."""

    fst_type: str
    version: int
    flags: int
    properties: int
    start: int
    num_states: int
    num_arcs: int
    size: int

    @property
    def aligned(self) -> bool:
        """Whether the arrays of a const file start on 16-byte boundaries (const-fst.h)."""
        return self.version == 1 or bool(self.flags & _IS_ALIGNED)


def _string(data: bytes, pos: int, path: Path) -> tuple[str, int]:
    """An OpenFst header string (int32 length, bytes) at ``pos``, and the position after it."""
    if pos + 4 > len(data):
        raise AsrdistError(f"{path}: truncated FST header")
    (n,) = struct.unpack_from("<i", data, pos)
    if not 0 <= n <= 64 or pos + 4 + n > len(data):
        raise AsrdistError(f"{path}: not an OpenFst binary FST (bad header)")
    return data[pos + 4:pos + 4 + n].decode("ascii", "replace"), pos + 4 + n


def read_header(path: str | os.PathLike) -> FstHeader:
    """The header of a binary FST: a ``standard`` (tropical) vector or const FST without
    symbol tables, which is what Kaldi's graphs are; anything else, and a file too short for
    the states and arcs its header announces, is one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"{path}: no such FST")
    with open(path, "rb") as f:
        head = f.read(256)
    if len(head) < 4 or struct.unpack_from("<i", head)[0] != _FST_MAGIC:
        raise AsrdistError(f"{path}: not an OpenFst binary FST")
    fst_type, pos = _string(head, 4, path)
    arc_type, pos = _string(head, pos, path)
    if pos + 40 > len(head):
        raise AsrdistError(f"{path}: truncated FST header")
    version, flags, props, start, num_states, num_arcs = struct.unpack_from("<iiQqqq", head, pos)
    if fst_type not in ("vector", "const"):
        raise AsrdistError(f"{path}: FST type {fst_type!r} is not supported (vector or const)")
    if arc_type != "standard":
        raise AsrdistError(f"{path}: arc type {arc_type!r} is not supported (standard)")
    if flags & _HAS_SYMBOLS:
        raise AsrdistError(f"{path}: holds symbol tables, which Kaldi's graphs do not "
                           "(fstsymbols --clear_isymbols --clear_osymbols removes them)")
    if num_states < 0 or num_arcs < 0:
        raise AsrdistError(f"{path}: the header gives no state or arc count")
    header = FstHeader(fst_type, version, flags, props, start, num_states, num_arcs, pos + 40)
    size = path.stat().st_size
    least = header.size + 12 * num_states + 16 * num_arcs  # vector: state heads, arcs
    if fst_type == "const":
        least = const_offsets(header)[1] + _ARC.itemsize * num_arcs
    if size < least:
        raise AsrdistError(f"{path}: truncated FST ({num_states} states and {num_arcs} arcs "
                           f"need {least} bytes, the file has {size})")
    return header


def const_offsets(head: FstHeader) -> tuple[int, int]:
    """Byte offsets of a const file's state array and arc array (what the compiled search
    maps: :func:`asrdist.decode.lattice.native.search_graph`)."""
    pad = 16 if head.aligned else 1
    states_at = -(-head.size // pad) * pad
    return states_at, -(-(states_at + _CONST_STATE.itemsize * head.num_states) // pad) * pad


def _records(f: BinaryIO, dtype: np.dtype, count: int, path: Path) -> np.ndarray:
    """``count`` records from the file's position; fewer is a truncated file."""
    out = np.fromfile(f, dtype=dtype, count=count)
    if len(out) != count:
        raise AsrdistError(f"{path}: truncated FST")
    return out


def fst_chunks(path: str | os.PathLike) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The states of a binary FST in order, a few hundred thousand at a time: final costs,
    arcs per state and their arcs (fields i, o, w, n), so that a graph of gigabytes is read
    with little memory and no FST object.

    OpenFst's layouts: const (const-fst.h): the array of states (final cost, first arc,
    #arcs, #input-eps, #output-eps), then the array of arcs, each on a 16-byte boundary of
    the file when it is aligned; vector (vector-fst.h): per state its final cost, its arc
    count (int64) and its arcs.
    """
    path = Path(path)
    head = read_header(path)
    with open(path, "rb") as f:
        if head.fst_type == "const":
            yield from _const_chunks(f, head, path)
        else:
            yield from _vector_chunks(f, head, path)


def _const_chunks(f: BinaryIO, head: FstHeader,
                  path: Path) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    states_at, arcs_at = const_offsets(head)
    done = 0
    for lo in range(0, head.num_states, _CHUNK_STATES):
        f.seek(states_at + lo * _CONST_STATE.itemsize)
        states = _records(f, _CONST_STATE, min(_CHUNK_STATES, head.num_states - lo), path)
        narcs = states["narcs"].astype(np.int64)
        if len(narcs) and (states["pos"][0] != done or np.any(
                np.diff(states["pos"].astype(np.int64)) != narcs[:-1])):
            raise AsrdistError(f"{path}: the arcs of the states are not in state order")
        f.seek(arcs_at + done * _ARC.itemsize)
        arcs = _records(f, _ARC, int(narcs.sum()), path)
        done += len(arcs)
        yield states["final"], narcs, arcs
    if done != head.num_arcs:
        raise AsrdistError(f"{path}: the states hold {done} arcs, the header says "
                           f"{head.num_arcs}")


def _vector_chunks(f: BinaryIO, head: FstHeader,
                   path: Path) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    f.seek(head.size)
    buf, state = b"", 0
    while state < head.num_states:
        more = f.read(_CHUNK_BYTES)
        buf += more
        starts, pos = [], 0  # a state's record: its length needs its arc count
        while state + len(starts) < head.num_states and pos + 12 <= len(buf):
            n = int.from_bytes(buf[pos + 4:pos + 12], "little", signed=True)
            if n < 0 or pos + 12 + 16 * n > len(buf):
                break
            starts.append(pos // 4)
            pos += 12 + 16 * n
        if not starts:
            if not more:
                raise AsrdistError(f"{path}: truncated FST (state {state} of "
                                   f"{head.num_states})")
            continue
        words = np.frombuffer(buf, dtype="<i4", count=pos // 4)
        at = np.asarray(starts, dtype=np.int64)
        narcs = words[at + 1].astype(np.int64) | (words[at + 2].astype(np.int64) << 32)
        k = np.arange(int(narcs.sum())) - np.repeat(np.cumsum(narcs) - narcs, narcs)
        arc_at = np.repeat(at + 3, narcs) + 4 * k
        arcs = words[arc_at[:, None] + np.arange(4)].copy().view(_ARC).ravel()
        state += len(starts)
        buf = buf[pos:]
        yield words[at].view("<f4"), narcs, arcs


def max_ilabel(path: str | os.PathLike) -> int:
    """The largest input label of a binary FST (a transition-id for HCLG), read in chunks:
    no FST object is made."""
    return max((int(arcs["i"].max()) for _, _, arcs in fst_chunks(path) if len(arcs)),
               default=0)


def write_vector(path: str | os.PathLike, out: BinaryIO) -> None:
    """Write a binary FST, vector or const, to ``out`` in OpenFst's vector layout (what
    kaldifst reads)."""
    head = read_header(path)
    props = head.properties | _MUTABLE_EXPANDED
    out.write(np.int32(_FST_MAGIC).tobytes() + _header_string("vector")
              + _header_string("standard") + struct.pack("<iiQqqq", 2, 0, props, head.start,
                                                         head.num_states, head.num_arcs))
    for final, narcs, arcs in fst_chunks(path):
        at = np.cumsum(3 + 4 * narcs) - (3 + 4 * narcs)  # int32 words of each state's record
        words = np.empty(int(3 * len(narcs) + 4 * len(arcs)), dtype="<i4")
        words[at] = final.view("<i4")
        words[at + 1] = narcs & 0xFFFFFFFF
        words[at + 2] = narcs >> 32
        k = np.arange(len(arcs)) - np.repeat(np.cumsum(narcs) - narcs, narcs)
        words[(np.repeat(at + 3, narcs) + 4 * k)[:, None] + np.arange(4)] = arcs.view(
            "<i4").reshape(-1, 4)
        out.write(words.tobytes())
    out.flush()


def _header_string(text: str) -> bytes:
    return struct.pack("<i", len(text)) + text.encode()


_STREAM = ("import sys; from asrdist.decode.graph import write_vector; "
           "write_vector(sys.argv[1], sys.stdout.buffer)")


def read_fst(path: str | os.PathLike) -> kaldifst.StdVectorFst:
    """Read a binary FST, vector or const."""
    path = Path(path)
    head = read_header(path)
    if head.fst_type == "vector":
        fst = kaldifst.StdVectorFst.read(str(path))
        if fst is None:
            raise AsrdistError(f"{path}: cannot read FST")
        return fst
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with subprocess.Popen([sys.executable, "-c", _STREAM, str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        fst = kaldifst.StdVectorFst.read(f"/dev/fd/{proc.stdout.fileno()}")
        proc.stdout.close()  # a writer left behind (the read failed) stops on a broken pipe
        err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
    if proc.returncode or fst is None:
        why = err[-1].removeprefix("asrdist.errors.AsrdistError: ") if err else "cannot read"
        raise AsrdistError(why if why.startswith(str(path)) else f"{path}: {why}")
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


def read_grammar(path: str | os.PathLike, words: dict[str, int]) -> kaldifst.StdVectorFst:
    """G from OpenFst's text format (``src dst in out [cost]`` arcs, ``state [cost]`` finals,
    the first line's source the start) with word symbols of words.txt, as fstcompile
    --isymbols=words.txt --osymbols=words.txt reads it; a bad line is one error naming it."""
    path = Path(path)
    if not path.is_file():
        raise AsrdistError(f"{path}: no such grammar (--grammar)")
    fst = kaldifst.StdVectorFst()

    def state(field: str, where: str) -> int:
        if not field.isdigit():
            raise AsrdistError(f"{where}: state {field!r} is not a number")
        while fst.num_states <= int(field):
            fst.add_state()
        return int(field)

    def cost(field: str, where: str) -> float:
        try:
            return float(field)
        except ValueError:
            raise AsrdistError(f"{where}: cost {field!r} is not a number") from None

    def label(field: str, where: str) -> int:
        if field not in words:
            raise AsrdistError(f"{where}: word {field!r} is not in words.txt")
        return words[field]

    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields, where = line.split(), f"{path}:{n}"
        if not fields:
            continue
        if len(fields) in (4, 5):
            src, dst = state(fields[0], where), state(fields[1], where)
            weight = cost(fields[4], where) if len(fields) == 5 else 0.0
            fst.add_arc(src, kaldifst.StdArc(label(fields[2], where), label(fields[3], where),
                                             weight, dst))
        elif len(fields) in (1, 2):
            fst.set_final(state(fields[0], where),
                          cost(fields[1], where) if len(fields) == 2 else 0.0)
        else:
            raise AsrdistError(f"{where}: expected 'src dst word word [cost]' or "
                               f"'state [cost]', got {len(fields)} fields")
        if fst.start < 0:
            fst.start = int(fields[0])
    if fst.num_states == 0:
        raise AsrdistError(f"{path}: empty grammar")
    return fst


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
    train_text: str | os.PathLike | None,
    out_dir: str | os.PathLike,
    order: int = 3,
    tree_path: str | os.PathLike | None = None,
    self_loop_scale: float = 0.1,
    command: str = "",
    grammar: str | os.PathLike | None = None,
) -> Path | Skipped:
    """Build ``out_dir`` (lm.arpa, G.fst, HCLG.fst, ..., log/mkgraph.log holding ``command``)
    unless it is done with the same options and inputs (asrdist.stage): the lang dir, the
    model, the tree and the text, or instead of an LM on the text the ``grammar`` (OpenFst
    text, :func:`read_grammar`).

    The tree is ``tree_path``, else the ``tree`` beside the model, else a monophone tree made
    from the lang's phones/sets.int as gmm-init-mono does (checked against the model).
    """
    out = Path(out_dir)
    if tree_path is not None and not Path(tree_path).is_file():
        raise AsrdistError(f"{tree_path}: no such tree (--tree)")
    if train_text is not None and grammar is not None:
        raise AsrdistError("--grammar and --text: give one (a grammar, or the text an n-gram "
                           "LM is estimated on), not both")
    if train_text is None and grammar is None:
        raise AsrdistError("give --text (an n-gram LM is estimated on it) or --grammar")
    tree_path = Path(tree_path) if tree_path else Path(model).parent / "tree"
    options = ({"order": order} if grammar is None else {"grammar": True})
    check = check_done(out, STAGE, {**options, "self_loop_scale": self_loop_scale},
                       [lang_dir, model, tree_path, train_text or grammar])
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

    if grammar is not None:
        (out / "lm.arpa").unlink(missing_ok=True)  # an earlier LM graph's: not this one's G
        with atomic_path(out / "G.fst") as tmp:
            if not read_grammar(grammar, lang.words).write(str(tmp)):
                raise AsrdistError(f"{out / 'G.fst'}: cannot write")
    else:
        estimate_lm(lang, train_text, order, out / "lm.arpa")
        with atomic_path(out / "G.fst") as tmp:
            kaldilm.arpa2fst(str(out / "lm.arpa"), str(tmp), disambig_symbol="#0",
                             read_symbol_table=str(lang.path / "words.txt"),
                             max_arpa_warnings=0)
    hclg, disambig_tids = compile_hclg(
        (read_fst(lang.path / "L_disambig.fst"), read_fst(out / "G.fst")),
        lang.disambig, tree, trans_model, self_loop_scale,
    )
    with atomic_path(out / "HCLG.fst") as tmp:
        if not hclg.write(str(tmp)):
            raise AsrdistError(f"{out / 'HCLG.fst'}: cannot write")
    for name in ("words.txt", "phones.txt", "oov.txt", "oov.int"):  # a lang for lmrescore
        if (lang.path / name).is_file():
            copy_file(lang.path / name, out / name)
    shutil.copytree(lang.path / "phones", out / "phones", dirs_exist_ok=True,
                    copy_function=copy_file)
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
