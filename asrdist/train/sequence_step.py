"""One step's sequence loss: a batch of whole utterances through the network, each scored
over its lattice, and the held-out objective the same way.

The network's log-posteriors minus the log priors are the lattice's acoustics, as decoding
scores them; each utterance's objective (:mod:`asrdist.train.sequence_loss`) is summed and
divided by the batch's frames, so the learning rate means what it means for cross-entropy.
With ``--ce-weight`` w, w times the frame cross-entropy on the numerator's pdfs is added.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from asrdist.kaldi.transition_model import TransitionInfo
from asrdist.train.objective import ObjectiveOptions
from asrdist.train.sequence_data import SequenceBatch, UtteranceBatches
from asrdist.train.sequence_loss import Numerator, SequenceOptions, sequence_loss


class SequenceObjective:
    """The loss of ``options``'s objective for batches of whole utterances."""

    def __init__(self, options: ObjectiveOptions, trans: TransitionInfo,
                 log_priors: np.ndarray, device: torch.device) -> None:
        self.options = options
        self.trans = trans
        self.silence = options.silence()
        self.loss_options = SequenceOptions(
            criterion="smbr" if options.objective == "smbr" else "mmi",
            acoustic_scale=options.acoustic_scale,
            boost=options.boost if options.objective == "bmmi" else 0.0,
            drop_frames=options.drop_frames,
            one_silence_class=options.one_silence_class)
        self.log_priors = torch.as_tensor(np.asarray(log_priors, np.float32), device=device)

    def _numerator(self, alignment: np.ndarray) -> Numerator:
        return Numerator(alignment, self.trans.tid_to_pdf, self.trans.tid_to_phone,
                         self.silence)

    def totals(self, model: torch.nn.Module, batch: SequenceBatch
               ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Minus the summed objective, the summed cross-entropy (both differentiable) and
        the frames of ``batch``."""
        logits = model(batch.x)[batch.keep].float()  # every utterance's frames, in order
        log_post = torch.log_softmax(logits, dim=-1)
        minus_objective = sequence_loss(
            log_post - self.log_priors,
            [(u.lattice, self._numerator(u.alignment)) for u in batch.utterances],
            self.loss_options)
        targets = torch.from_numpy(np.concatenate([u.pdfs for u in batch.utterances]))
        ce = F.nll_loss(log_post, targets.to(log_post.device), reduction="sum")
        return minus_objective, ce, batch.frames

    def loss(self, model: torch.nn.Module, batch: SequenceBatch) -> torch.Tensor:
        """The training loss per frame: minus the objective, plus --ce-weight times CE."""
        minus_objective, ce, frames = self.totals(model, batch)
        if self.options.ce_weight:
            minus_objective = minus_objective + self.options.ce_weight * ce
        return minus_objective / frames

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, batches: UtteranceBatches,
                 device: torch.device) -> dict[str, float]:
        """The objective per frame (and CE) of every batch, the model in eval mode."""
        was_training = model.training
        model.eval()
        objective, ce, frames = 0.0, 0.0, 0
        try:
            for _ in range(len(batches)):
                minus, batch_ce, batch_frames = self.totals(model,
                                                            batches.next_batch().to(device))
                objective, ce = objective - minus.item(), ce + batch_ce.item()
                frames += batch_frames
        finally:
            model.train(was_training)
        if frames == 0:
            return {}
        return {f"heldout_{self.options.objective}": objective / frames,
                "heldout_seq_ce": ce / frames}
