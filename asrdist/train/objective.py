"""What a training run minimises: frame-level cross-entropy, or a sequence-discriminative
objective (MMI, boosted MMI, sMBR) over denominator lattices, from a cross-entropy model.

One option, ``--objective``, so every strategy, checkpoint, resume and run-identity rule
applies to sequence training unchanged; the sequence objectives' own options are declared
``when=`` and are no part of a cross-entropy run.
"""

from __future__ import annotations

from dataclasses import dataclass

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, option

OBJECTIVES = ("ce", "mmi", "bmmi", "smbr")
SEQUENCE = ("mmi", "bmmi", "smbr")
WITH_PHONES = ("bmmi", "smbr")  # compare the lattice's phones with the numerator's


@dataclass(frozen=True)
class ObjectiveOptions(Options):
    """The objective and, for sequence training, its lattices, numerator and scales."""

    objective: str = option(
        "ce", "ce: frame cross-entropy on --targets; mmi, bmmi (boosted MMI), smbr (state-level "
              "minimum Bayes risk): sequence training over --denlats from an --init-model, whole "
              "utterances per step, the loss reported per frame (smbr: minus the expected frame "
              "accuracy)", OBJECTIVES, added=True)
    init_model: str = option(
        "", "sequence training: the cross-entropy model (final.pt) it starts from, of the "
            "same model options", when=("objective", SEQUENCE))
    denlats: str = option(
        "", "sequence training: denominator lattices of the training data (a decode dir: "
            "num_jobs, lat.N.gz; asrdist-decode --model INIT_MODEL --data DATA)",
        when=("objective", SEQUENCE))
    alignments: str = option(
        "", "sequence training: the Kaldi alignment dir --targets was ingested from (ali.N.gz, "
            "final.mdl): the numerator's transition-ids and the lattices' transition model",
        when=("objective", SEQUENCE))
    acoustic_scale: float = option(
        0.1, "sequence training: the acoustic scale kappa of the lattice's scores",
        check=POSITIVE, when=("objective", SEQUENCE))
    boost: float = option(
        0.1, "boosted MMI: b, times each frame's phone error, added to the denominator's "
             "log-likelihoods (Kaldi's --boost)", check=NON_NEGATIVE, when=("objective", ("bmmi",)))
    silence_phones: str = option(
        "", "bmmi and smbr: the silence phones, colon-separated ids (lang/phones/silence.csl): "
            "no error under boosting, no accuracy under sMBR", when=("objective", WITH_PHONES))
    one_silence_class: bool = option(
        False, "smbr: a silence frame is correct where the reference is silence too (Kaldi's "
               "--one-silence-class)", when=("objective", ("smbr",)))
    drop_frames: bool = option(
        True, "mmi and bmmi: no gradient on frames whose numerator pdf the lattice never "
              "reaches (Kaldi's --drop-frames)", when=("objective", ("mmi", "bmmi")))
    ce_weight: float = option(
        0.0, "sequence training: add this times the frame cross-entropy on the numerator "
             "(a regulariser)", check=NON_NEGATIVE, when=("objective", SEQUENCE))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objective in SEQUENCE:
            for name in ("init_model", "denlats", "alignments"):
                if not getattr(self, name):
                    raise AsrdistError(f"--objective {self.objective} needs "
                                       f"--{name.replace('_', '-')}")
        self.silence()  # refused here, not at the first step

    @property
    def sequence(self) -> bool:
        return self.objective in SEQUENCE

    def silence(self) -> frozenset[int]:
        """The --silence-phones ids."""
        try:
            return frozenset(int(p) for p in self.silence_phones.split(":") if p.strip())
        except ValueError:
            raise AsrdistError(f"--silence-phones {self.silence_phones!r}: colon-separated "
                               "phone ids, e.g. 1:2:3") from None
