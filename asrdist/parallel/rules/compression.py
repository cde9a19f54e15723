"""A learner's ``--compress``: one object that every strategy's exchange encodes through.

Compression is an axis of every multi-learner strategy, not a strategy, so it is not rebuilt
inside each of them (as torch keeps it in DDP's comm hooks, outside its averagers):
:class:`asrdist.parallel.base.DistributedStrategy` makes one :class:`Compression` from the
strategy's :class:`~asrdist.parallel.options.CompressOptions`, and the strategy asks it for
the part its exchange needs:

- :meth:`Compression.sender`: what a learner sends to one peer or server (adpsgd's weights,
  diloco-async's pushes) encoded with its error feedback;
- :meth:`Compression.mean`: a compressed mean over all learners by name (ma, bmuf and diloco
  one, ``"model"``; streaming-diloco one per fragment), and :attr:`Compression.reference`,
  the weights a block's compressed update is taken from;
- :meth:`Compression.gradient`: ssgd's gradient mean, made by the transport that runs it.

Their resume state is :meth:`Compression.state_dict`, one checkpoint entry (``compress``).
A part asked for after :meth:`Compression.load_state_dict` (a fragment made in
``wrap_model``) starts from the state saved for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from asrdist.parallel.rules.compress import (
    Codec,
    CompressedMean,
    ErrorFeedback,
    GradientCompression,
    make_codec,
)

# a transport's maker of ssgd's gradient compression (Transport.gradient_compression)
GradientMaker = Callable[[str, int, bool, int], GradientCompression]


class Compression:
    """One learner's ``--compress name`` (``error_feedback``, ``powersgd_rank``: the options
    of that name) among ``learners``. ``active`` is False with ``none`` or a world of one:
    every part is then None and the exchanges send float32."""

    def __init__(self, name: str, learners: int, rank: int, error_feedback: bool = True,
                 powersgd_rank: int = 1) -> None:
        self.name, self.learners, self.rank = name, learners, rank
        self.error_feedback, self.powersgd_rank = error_feedback, powersgd_rank
        self.active = learners > 1 and name != "none"
        self.codec: Codec | None = None
        if self.active and name != "powersgd":
            self.codec = make_codec(name)
        self.reference: torch.Tensor | None = None
        self._sender: ErrorFeedback | None = None
        self._means: dict[str, CompressedMean] = {}
        self._gradient: GradientCompression | None = None
        self._saved: dict[str, Any] = {}

    def sender(self) -> ErrorFeedback | None:
        """This learner's encoder of what it sends, with its error feedback."""
        if self.codec is not None and self._sender is None:
            self._sender = ErrorFeedback(self.codec, self.error_feedback)
            self._sender.load_state_dict(self._saved.get("sender", {}))
        return self._sender

    def mean(self, name: str) -> CompressedMean | None:
        """The compressed mean called ``name``, with error feedback of its own."""
        if self.codec is None:
            return None
        if name not in self._means:
            made = CompressedMean(self.codec, self.learners, self.rank, self.error_feedback)
            made.load_state_dict(self._saved.get("means", {}).get(name, {}))
            self._means[name] = made
        return self._means[name]

    def gradient(self, make: GradientMaker | None = None) -> GradientCompression | None:
        """ssgd's compressed gradient mean, made by ``make`` (its transport's
        ``gradient_compression``, the form that transport runs; None: the rules' own)."""
        if not self.active:
            return None
        if self._gradient is None:
            args = (self.name, self.rank, self.error_feedback, self.powersgd_rank)
            self._gradient = make(*args) if make is not None \
                else GradientCompression(self.name, self.learners, *args[1:])
            if "gradient" in self._saved:
                self._gradient.load_state_dict(self._saved["gradient"])
        return self._gradient

    def state_dict(self) -> dict[str, Any]:
        """Every part's resume state (a part saved but not asked for again: as loaded)."""
        out = dict(self._saved)
        if self.reference is not None:
            out["reference"] = self.reference.clone()
        if self._sender is not None:
            out["sender"] = self._sender.state_dict()
        if self._means:
            out["means"] = {**self._saved.get("means", {}),
                            **{name: m.state_dict() for name, m in self._means.items()}}
        if self._gradient is not None:
            out["gradient"] = self._gradient.state_dict()
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._saved = dict(state)
        if state.get("reference") is not None:
            self.reference = state["reference"]
        if self._sender is not None:
            self._sender.load_state_dict(state.get("sender", {}))
        for name, m in self._means.items():
            m.load_state_dict(state.get("means", {}).get(name, {}))
        if self._gradient is not None and "gradient" in state:
            self._gradient.load_state_dict(state["gradient"])


def from_format3(state: dict[str, Any]) -> dict[str, Any]:
    """A strategy state as checkpoint format 3 held it, in this layout: each strategy kept its
    own ``compress`` entry (adpsgd's and diloco-async's a sender's residual, ma's, bmuf's and
    diloco's the reference and their one mean, ssgd's its gradient compression's state) and
    streaming-diloco one per fragment; they become the parts of one entry, so that a run
    checkpointed before resumes exactly."""
    out = dict(state)
    old = out.pop("compress", None)
    parts: dict[str, Any] = {}
    if old is not None:
        if "residual" in old:
            parts["sender"] = old
        elif "reference" in old:
            parts["reference"] = old["reference"]
            parts["means"] = {"model": {k: v for k, v in old.items() if k != "reference"}}
        else:
            parts["gradient"] = old
    if out.get("fragments"):
        fragments = []
        for i, fragment in enumerate(out["fragments"]):
            fragment = dict(fragment)
            mean = fragment.pop("compress", None)
            if mean is not None:
                parts.setdefault("means", {})[f"fragment{i}"] = mean
            fragments.append(fragment)
        out["fragments"] = fragments
    if parts:
        out["compress"] = parts
    return out
