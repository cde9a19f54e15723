"""Kaldi HMM topologies in the text form of utils/gen_topo.pl, as a Kaldi lang dir has them."""

from __future__ import annotations

from collections.abc import Sequence


def _fmt(prob: float) -> str:
    """Print a probability as Perl does (0.25, 0.333333333333333): shortest round-trip form."""
    return f"{prob:.15g}"


def make_topo(
    nonsil_phones: Sequence[int],
    sil_phones: Sequence[int],
    num_nonsil_states: int = 3,
    num_sil_states: int = 5,
) -> str:
    """Text HmmTopology: left-to-right nonsilence HMMs, ergodic-middle silence HMMs.

    Same states and prototype transition probabilities as Kaldi's utils/gen_topo.pl (0.75 self
    loop / 0.25 forward; silence: the first and middle states jump to any middle state).
    """
    if not 1 <= num_nonsil_states <= 100 or not 3 <= num_sil_states <= 100:
        raise ValueError(f"bad HMM sizes {num_nonsil_states}/{num_sil_states}")
    lines = ["<Topology>", "<TopologyEntry>", "<ForPhones>", " ".join(map(str, nonsil_phones))]
    lines.append("</ForPhones>")
    for s in range(num_nonsil_states):
        lines.append(
            f"<State> {s} <PdfClass> {s} <Transition> {s} 0.75 <Transition> {s + 1} 0.25 </State>"
        )
    lines += [f"<State> {num_nonsil_states} </State>", "</TopologyEntry>"]
    if sil_phones:
        p = _fmt(1.0 / (num_sil_states - 1))
        lines += ["<TopologyEntry>", "<ForPhones>", " ".join(map(str, sil_phones)), "</ForPhones>"]
        first = "".join(f"<Transition> {t} {p} " for t in range(num_sil_states - 1))
        lines.append(f"<State> 0 <PdfClass> 0 {first}</State>")
        middle = "".join(f"<Transition> {t} {p} " for t in range(1, num_sil_states))
        for s in range(1, num_sil_states - 1):
            lines.append(f"<State> {s} <PdfClass> {s} {middle}</State>")
        last = num_sil_states - 1
        lines.append(
            f"<State> {last} <PdfClass> {last} <Transition> {last} 0.75 "
            f"<Transition> {num_sil_states} 0.25 </State>"
        )
        lines += [f"<State> {num_sil_states} </State>", "</TopologyEntry>"]
    lines.append("</Topology>")
    return "\n".join(lines) + "\n"
