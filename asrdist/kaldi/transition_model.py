"""Kaldi's TransitionModel (first part of ``final.mdl``): read, write, transition-id -> pdf.

Without Kaldi binaries this parses final.mdl in binary and text form, old (``<Triples>``:
phone, hmm-state, pdf) and new (``<Tuples>``: + self-loop pdf) versions, and derives the
transition-id map exactly as Kaldi's TransitionModel::ComputeDerived: transition-states are
the 1-based tuples in file order; each state's transition-ids enumerate the transitions of its
topology HMM state in order; a transition-id's pdf is the tuple's self-loop pdf when the
transition is the self-loop and its forward pdf otherwise. The writer reproduces Kaldi's
Write byte for byte (``<Triples>`` whenever every state's forward and self-loop pdf-classes
agree, as Kaldi does; ``<Tuples>`` otherwise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.io_funcs import KaldiReader, KaldiWriter

if TYPE_CHECKING:
    import kaldi_hmm_gmm as khg

NO_PDF = -1


@dataclass(frozen=True)
class HmmState:
    """One state of a topology entry; the final state has no pdf-class and no transitions."""

    forward_pdf_class: int
    self_loop_pdf_class: int
    transitions: tuple[tuple[int, float], ...]


@dataclass
class HmmTopology:
    """Kaldi's HmmTopology: per-phone HMMs shared through ``phone2idx`` entries."""

    phones: list[int]
    phone2idx: list[int]
    entries: list[list[HmmState]]

    def entry(self, phone: int) -> list[HmmState]:
        if phone < 0 or phone >= len(self.phone2idx) or self.phone2idx[phone] < 0:
            raise ValueError(f"phone {phone} is not covered by the topology")
        return self.entries[self.phone2idx[phone]]

    @property
    def is_hmm(self) -> bool:
        """True when no state has distinct forward and self-loop pdf-classes."""
        return all(s.forward_pdf_class == s.self_loop_pdf_class for e in self.entries for s in e)


@dataclass
class TransitionInfo:
    """A TransitionModel and the maps derived from it.

    ``tid_to_pdf[t]`` is the pdf-id of transition-id ``t`` (index 0 is unused and holds -1);
    ``tid_to_phone`` likewise. ``log_probs`` is indexed by transition-id (element 0 unused).
    """

    topology: HmmTopology
    tuples: list[tuple[int, int, int, int]]  # (phone, hmm_state, forward_pdf, self_loop_pdf)
    log_probs: np.ndarray
    tid_to_pdf: np.ndarray = field(init=False)
    tid_to_phone: np.ndarray = field(init=False)
    num_pdfs: int = field(init=False)

    def __post_init__(self) -> None:
        self.log_probs = np.asarray(self.log_probs, dtype=np.float32)
        pdfs, phones = [NO_PDF], [0]
        num_pdfs = 0
        for tstate, (phone, hmm_state, forward_pdf, self_loop_pdf) in enumerate(self.tuples, 1):
            entry = self.topology.entry(phone)
            if not 0 <= hmm_state < len(entry) or min(forward_pdf, self_loop_pdf) < 0:
                raise ValueError(f"transition-state {tstate} {self.tuples[tstate - 1]} is invalid")
            num_pdfs = max(num_pdfs, forward_pdf + 1, self_loop_pdf + 1)
            for dest, _prob in entry[hmm_state].transitions:
                pdfs.append(self_loop_pdf if dest == hmm_state else forward_pdf)
                phones.append(phone)
        if self.log_probs.shape != (len(pdfs),):
            raise ValueError(
                f"{len(pdfs) - 1} transition-ids but {self.log_probs.size} log-probs "
                "(expected one more than the transition-ids)"
            )
        self.tid_to_pdf = np.asarray(pdfs, dtype=np.int32)
        self.tid_to_phone = np.asarray(phones, dtype=np.int32)
        self.num_pdfs = num_pdfs

    @property
    def num_transition_ids(self) -> int:
        return len(self.tid_to_pdf) - 1

    @property
    def phones(self) -> list[int]:
        return list(self.topology.phones)


# ---- parsing -------------------------------------------------------------------------------


def parse_topology(reader: KaldiReader) -> HmmTopology:
    """HmmTopology::Read (binary, with the -1 marker of the extended format, or text)."""
    reader.expect_token("<Topology>")
    if reader.binary:
        phones = reader.read_int_vector().tolist()
        phone2idx = reader.read_int_vector().tolist()
        size = reader.read_int32()
        is_hmm = size != -1
        if not is_hmm:
            size = reader.read_int32()
        entries = []
        for _ in range(size):
            states = []
            for _ in range(reader.read_int32()):
                forward = reader.read_int32()
                self_loop = forward if is_hmm else reader.read_int32()
                trans = tuple(
                    (reader.read_int32(), reader.read_float()) for _ in range(reader.read_int32())
                )
                states.append(HmmState(forward, self_loop, trans))
            entries.append(states)
        reader.expect_token("</Topology>")
        topo = HmmTopology(phones, phone2idx, entries)
    else:
        topo = _parse_text_topology(reader)
    _check_topology(topo, reader)
    return topo


def _parse_text_topology(reader: KaldiReader) -> HmmTopology:
    phones: list[int] = []
    phone2idx: list[int] = []
    entries: list[list[HmmState]] = []
    while (token := reader.read_token()) != "</Topology>":
        if token != "<TopologyEntry>":
            raise reader.fail(f"expected <TopologyEntry> or </Topology>, got {token[:40]}")
        reader.expect_token("<ForPhones>")
        entry_phones = []
        while (word := reader.read_token()) != "</ForPhones>":
            try:
                entry_phones.append(int(word))
            except ValueError:
                raise reader.fail(f"expected a phone id, got {word[:20]}") from None
        states: list[HmmState] = []
        while (token := reader.read_token()) != "</TopologyEntry>":
            if token != "<State>":
                raise reader.fail(f"expected <State> or </TopologyEntry>, got {token[:40]}")
            if reader.read_int32() != len(states):
                raise reader.fail("topology states must be numbered in order from 0")
            token = reader.read_token()
            forward = self_loop = NO_PDF
            if token == "<PdfClass>":
                forward = self_loop = reader.read_int32()
                token = reader.read_token()
            elif token == "<ForwardPdfClass>":
                forward = reader.read_int32()
                reader.expect_token("<SelfLoopPdfClass>")
                self_loop = reader.read_int32()
                token = reader.read_token()
            trans = []
            while token == "<Transition>":
                trans.append((reader.read_int32(), reader.read_float()))
                token = reader.read_token()
            if token != "</State>":
                raise reader.fail(f"expected </State>, got {token[:40]}")
            states.append(HmmState(forward, self_loop, tuple(trans)))
        for phone in entry_phones:
            if phone <= 0:
                raise reader.fail(f"invalid phone id {phone} in topology")
            if len(phone2idx) <= phone:
                phone2idx.extend([-1] * (phone + 1 - len(phone2idx)))
            if phone2idx[phone] != -1:
                raise reader.fail(f"phone {phone} is in more than one topology entry")
            phone2idx[phone] = len(entries)
            phones.append(phone)
        entries.append(states)
    return HmmTopology(sorted(phones), phone2idx, entries)


def _check_topology(topo: HmmTopology, reader: KaldiReader) -> None:
    if not topo.phones or not topo.entries:
        raise reader.fail("empty HMM topology")
    for phone in topo.phones:
        if not 0 <= phone < len(topo.phone2idx) or not 0 <= topo.phone2idx[phone] < len(
            topo.entries
        ):
            raise reader.fail(f"topology phone {phone} has no valid entry")
    for entry in topo.entries:
        for state in entry:
            for dest, _ in state.transitions:
                if not 0 <= dest < len(entry):
                    raise reader.fail(f"topology transition to invalid state {dest}")


def parse_transition_model(reader: KaldiReader) -> TransitionInfo:
    """TransitionModel::Read at the reader's position (``<Triples>`` or ``<Tuples>``)."""
    reader.expect_token("<TransitionModel>")
    topo = parse_topology(reader)
    kind = reader.read_token()
    if kind not in ("<Triples>", "<Tuples>"):
        raise reader.fail(f"expected <Triples> or <Tuples>, got {kind[:40]}")
    size = reader.read_int32()
    if size < 0:
        raise reader.fail(f"negative number of transition-states {size}")
    tuples = []
    for _ in range(size):
        phone, hmm_state, forward = (reader.read_int32() for _ in range(3))
        self_loop = reader.read_int32() if kind == "<Tuples>" else forward
        tuples.append((phone, hmm_state, forward, self_loop))
    reader.expect_token("</Tuples>" if kind == "<Tuples>" else "</Triples>")
    reader.expect_token("<LogProbs>")
    log_probs = reader.read_float_vector()
    reader.expect_token("</LogProbs>")
    reader.expect_token("</TransitionModel>")
    try:
        return TransitionInfo(topo, tuples, log_probs)
    except ValueError as err:
        raise reader.fail(f"inconsistent TransitionModel: {err}") from None


def open_model(path: str | os.PathLike) -> KaldiReader:
    """A reader at the start of a ``final.mdl``, checked to begin with its TransitionModel."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise AsrdistError(f"{path}: model file not found") from None
    reader = KaldiReader(data, str(path))
    try:
        first = reader.peek_token()
    except AsrdistError:
        first = ""
    if first != "<TransitionModel>":
        raise AsrdistError(
            f"{path}: not a Kaldi final.mdl (expected <TransitionModel>, got {first[:30]!r})"
        )
    return reader


def read_transition_model(path: str | os.PathLike) -> TransitionInfo:
    """The TransitionModel at the start of ``final.mdl`` (binary or text)."""
    return parse_transition_model(open_model(path))


# ---- writing -------------------------------------------------------------------------------


def write_topology(writer: KaldiWriter, topo: HmmTopology) -> None:
    """HmmTopology::Write, byte for byte."""
    is_hmm = topo.is_hmm
    writer.write_token("<Topology>")
    if writer.binary:
        writer.write_int_vector(topo.phones)
        writer.write_int_vector(topo.phone2idx)
        if not is_hmm:
            writer.write_int32(-1)
        writer.write_int32(len(topo.entries))
        for entry in topo.entries:
            writer.write_int32(len(entry))
            for state in entry:
                writer.write_int32(state.forward_pdf_class)
                if not is_hmm:
                    writer.write_int32(state.self_loop_pdf_class)
                writer.write_int32(len(state.transitions))
                for dest, prob in state.transitions:
                    writer.write_int32(dest)
                    writer.write_float(prob)
    else:
        writer.raw(b"\n")
        for idx, entry in enumerate(topo.entries):
            writer.write_token("<TopologyEntry>")
            writer.raw(b"\n")
            writer.write_token("<ForPhones>")
            writer.raw(b"\n")
            writer.raw(b"".join(b"%d " % p for p, i in enumerate(topo.phone2idx) if i == idx))
            writer.raw(b"\n")
            writer.write_token("</ForPhones>")
            writer.raw(b"\n")
            for num, state in enumerate(entry):
                writer.write_token("<State>")
                writer.write_int32(num)
                if state.forward_pdf_class != NO_PDF:
                    if is_hmm:
                        writer.write_token("<PdfClass>")
                        writer.write_int32(state.forward_pdf_class)
                    else:
                        writer.write_token("<ForwardPdfClass>")
                        writer.write_int32(state.forward_pdf_class)
                        writer.write_token("<SelfLoopPdfClass>")
                        writer.write_int32(state.self_loop_pdf_class)
                for dest, prob in state.transitions:
                    writer.write_token("<Transition>")
                    writer.write_int32(dest)
                    writer.write_float(prob)
                writer.write_token("</State>")
                writer.raw(b"\n")
            writer.write_token("</TopologyEntry>")
            writer.raw(b"\n")
    writer.write_token("</Topology>")
    writer.text_newline()


def write_transition_model(writer: KaldiWriter, trans: TransitionInfo) -> None:
    """TransitionModel::Write, byte for byte."""
    is_hmm = trans.topology.is_hmm
    writer.write_token("<TransitionModel>")
    writer.text_newline()
    write_topology(writer, trans.topology)
    writer.write_token("<Triples>" if is_hmm else "<Tuples>")
    writer.write_int32(len(trans.tuples))
    writer.text_newline()
    for phone, hmm_state, forward, self_loop in trans.tuples:
        writer.write_int32(phone)
        writer.write_int32(hmm_state)
        writer.write_int32(forward)
        if not is_hmm:
            writer.write_int32(self_loop)
        writer.text_newline()
    writer.write_token("</Triples>" if is_hmm else "</Tuples>")
    writer.text_newline()
    writer.write_token("<LogProbs>")
    writer.text_newline()
    writer.write_float_vector(trans.log_probs)
    writer.write_token("</LogProbs>")
    writer.text_newline()
    writer.write_token("</TransitionModel>")
    writer.text_newline()


def transition_info_from_khg(trans_model: khg.TransitionModel) -> TransitionInfo:
    """Copy a khg TransitionModel (which has no Kaldi write) into a TransitionInfo."""
    phones, phone2idx, entries = trans_model.topo.__getstate__()
    topo = HmmTopology(
        phones=list(phones),
        phone2idx=list(phone2idx),
        entries=[
            [
                HmmState(f, s, tuple((int(d), float(p)) for d, p in t))
                for f, s, t in (state.__getstate__() for state in entry)
            ]
            for entry in entries
        ],
    )
    tuples = [tuple(int(v) for v in t.__getstate__()) for t in trans_model.tuples]
    return TransitionInfo(topo, tuples, np.asarray(trans_model.log_probs, dtype=np.float32))
