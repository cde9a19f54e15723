"""Layer-wise RBM pretraining of the sigmoid DNN (Hinton et al. 2006; Kaldi nnet1's
steps/nnet/pretrain_dbn.sh), optionally data-parallel with model averaging.

Layer 1 is a Gaussian-Bernoulli RBM on spliced features (spliced as the DNN does it) that
are normalised to zero mean and unit variance with statistics of the first minibatches;
layers 2.. are Bernoulli-Bernoulli RBMs on the hidden probabilities of the layers below.
Each is trained with CD-1 for ``epochs`` passes over the data (the Gaussian layer twice as
many and at the lower rate ``lr_gaussian``, as nnet1 does; the rates, momentum ramp and L2
cost are nnet1's defaults as recalled, not verified against its script), momentum rising
linearly from ``momentum`` to ``momentum_high`` over the first pass.

With several learners (torchrun / mpiexec / srun), each trains on its own shard of every
pass (the trainer's epoch stream, asrdist.train.stream), and the learners average their RBM's
parameters every ``avg_period`` steps and at the end of each layer (Su & Chen's fork does the
same with MPI). They are learners of the ``ma`` strategy, whose hooks each CD-1 step calls: its
averaging, and with it the liveness, exchange timeout and final leaving-together of
asrdist-train. The result is ``dbn.pt`` (asrdist.models.dbn), which ``asrdist-train
--init-dbn`` loads. No checkpoints: an interrupted pretraining starts again (it is one or two
passes per layer).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from asrdist.data.dataset import IGNORE, UtteranceReader, load_corpus
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write
from asrdist.models.dbn import FORMAT
from asrdist.models.rbm import RBM
from asrdist.parallel.launch import DEFAULT_TIMEOUT_S
from asrdist.parallel.ma import MAOptions, ModelAveraging
from asrdist.parallel.strategy import Learner
from asrdist.stage import Skipped, check_done
from asrdist.train.stream import EpochStream

log = logging.getLogger(__name__)

STATS_BATCHES = 20  # minibatches whose spliced frames give the normalisation


@dataclass
class PretrainConfig:
    """The options of asrdist-pretrain-rbm (each is a flag of the same name)."""

    data: str
    targets: str
    out: str
    splice: int = 5
    hidden_layers: int = 6
    hidden_units: int = 1024
    epochs: int = 1
    batch_size: int = 16  # chunks per minibatch (x chunk_len frames)
    chunk_len: int = 16
    lr: float = 0.4
    lr_gaussian: float = 0.01
    momentum: float = 0.5
    momentum_high: float = 0.9
    l2: float = 0.0002
    avg_period: int = 8
    cmvn: str = "spk"
    cmvn_norm_vars: bool = False
    shuffle_buffer: int = 2048
    seed: int = 0
    device: str = "cpu"
    exchange_timeout: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("splice", "hidden_layers", "hidden_units", "epochs", "batch_size",
                     "chunk_len", "avg_period"):
            if getattr(self, name) <= (-1 if name == "splice" else 0):
                raise AsrdistError(f"--{name.replace('_', '-')} must be "
                                   f"{'non-negative' if name == 'splice' else 'positive'}, "
                                   f"got {getattr(self, name)}")
        for name in ("lr", "lr_gaussian", "exchange_timeout"):
            if getattr(self, name) <= 0:
                raise AsrdistError(f"--{name.replace('_', '-')} must be positive")
        if not 0 <= self.momentum <= self.momentum_high < 1:
            raise AsrdistError("--momentum and --momentum-high: need 0 <= momentum <= "
                               f"momentum-high < 1, got {self.momentum}, {self.momentum_high}")


# Options that do not change the RBMs: a done run rerun with other values of only these is
# skipped (asrdist.stage).
NOT_FINGERPRINTED = frozenset({"out", "device", "exchange_timeout"})


class _Pretrainer:
    def __init__(self, cfg: PretrainConfig, strategy: ModelAveraging) -> None:
        self.cfg, self.strategy = cfg, strategy
        self.rank, self.world_size = strategy.rank, strategy.world_size
        self.device = torch.device(cfg.device)
        self.corpus = load_corpus(cfg.data, cfg.targets, 0.05)
        self.epochs = EpochStream(self.corpus, np.arange(len(self.corpus.utts)), cfg.data,
                                  cfg.chunk_len, cfg.batch_size,
                                  max(cfg.shuffle_buffer, cfg.batch_size), cfg.seed, self.rank,
                                  self.world_size)
        self.reader = UtteranceReader(self.corpus, cfg.cmvn, cfg.cmvn_norm_vars, None)
        self.input_dim = int(self.reader.read(0)[0].shape[1])
        self.passes = 0  # data passes so far (each a new order)
        self.generator = torch.Generator(self.device).manual_seed(cfg.seed * 1000 + self.rank)
        self.records: list[dict] = []

    def _batches(self):
        """One pass of this learner's shard: (rows of spliced frames, labelled only)."""
        cfg = self.cfg
        epoch = self.passes
        self.passes += 1
        steps = self.epochs.steps(epoch)
        stream = self.epochs.open(self.reader, epoch, cfg.splice, cfg.splice)
        window = 2 * cfg.splice + 1
        for _ in range(steps):
            x, y = stream.next_batch()
            feats = torch.from_numpy(x).to(self.device)
            spliced = feats.unfold(1, window, 1).transpose(2, 3).flatten(2)
            keep = torch.from_numpy(y != IGNORE).to(self.device)
            yield spliced[keep], steps

    def normalisation(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation of the spliced frames (all learners' first
        minibatches), so the Gaussian RBM sees unit-variance inputs."""
        total = torch.zeros(3, self.input_dim * (2 * self.cfg.splice + 1), dtype=torch.float64,
                            device=self.device)
        for i, (rows, _) in enumerate(self._batches()):
            r = rows.double()
            total[0] += r.sum(0)
            total[1] += (r * r).sum(0)
            total[2] += len(r)
            if i + 1 == STATS_BATCHES:
                break
        if self.world_size > 1:
            dist.all_reduce(total)
        mean = total[0] / total[2]
        var = (total[1] / total[2] - mean * mean).clamp(min=1e-8)
        return mean.float(), var.sqrt().float()

    def train_layer(self, index: int, below: list[RBM], mean: torch.Tensor,
                    std: torch.Tensor) -> RBM:
        """Train RBM ``index`` on the layers ``below``; every learner ends with the same one,
        the learners' average (after the last layer, the strategy's final average)."""
        cfg = self.cfg
        gaussian = index == 0
        visible = len(mean) if gaussian else cfg.hidden_units
        torch.manual_seed(cfg.seed + index)  # the same start on every learner
        rbm = RBM(visible, cfg.hidden_units, gaussian).to(self.device)
        velocity = [torch.zeros_like(p) for p in rbm.parameters()]
        lr = cfg.lr_gaussian if gaussian else cfg.lr
        passes = 2 * cfg.epochs if gaussian else cfg.epochs
        step = 0
        for p in range(passes):
            mse_sum, n = 0.0, 0
            for rows, steps in self._batches():
                self.strategy.before_step(rbm, step)
                v = (rows - mean) / std
                for layer in below:
                    v = layer.hidden_probs(v)
                ramp = min(1.0, step / steps)
                momentum = cfg.momentum + (cfg.momentum_high - cfg.momentum) * ramp
                stats = rbm.cd1(v, rbm.sample_hidden(v, self.generator))
                self.strategy.after_backward(rbm, step)
                grads = [stats.weight - cfg.l2 * rbm.weight, stats.visible_bias,
                         stats.hidden_bias]
                for param, vel, grad in zip(rbm.parameters(), velocity, grads, strict=True):
                    vel.mul_(momentum).add_(grad, alpha=lr)
                    param.add_(vel)
                self.strategy.after_step(rbm, step)  # the average, every avg_period steps
                step += 1
                mse_sum, n = mse_sum + stats.recon_mse, n + 1
            record = {"layer": index + 1, "pass": p + 1, "steps": step,
                      "recon_mse": mse_sum / max(n, 1), "gaussian": gaussian}
            log.info("RBM %d pass %d: reconstruction mse %.4f", index + 1, p + 1,
                     record["recon_mse"])
            self.records.append(record)
        if index + 1 < cfg.hidden_layers:
            self.strategy.average(rbm.parameters())
        else:  # all learners leave together: none loses the store while another still needs it
            self.strategy.finalize(rbm)
        checksum = sum(float(p.double().sum()) for p in rbm.parameters())
        log.info("RBM %d done: parameter sum %.9g", index + 1, checksum)  # equal on all learners
        return rbm


def pretrain(cfg: PretrainConfig, learner: Learner | None = None) -> Path | Skipped:
    """Train the RBM stack as ``learner`` (one alone by default) and write ``out/dbn.pt``
    (learner 0); a done run is skipped."""
    learner = learner or Learner()
    out = Path(cfg.out)
    options = {k: v for k, v in asdict(cfg).items() if k not in NOT_FINGERPRINTED}
    check = check_done(out, "pretrain", options, [cfg.data, cfg.targets])
    path = out / "dbn.pt"
    if check.done:
        return check.skipped()
    strategy = ModelAveraging(learner, MAOptions(
        exchange_timeout=cfg.exchange_timeout, distance_every=0, avg_period=cfg.avg_period,
        batch_size=cfg.batch_size, chunk_len=cfg.chunk_len))
    try:
        run = _Pretrainer(cfg, strategy)
        try:
            mean, std = run.normalisation()
            stack: list[RBM] = []
            for index in range(cfg.hidden_layers):
                stack.append(run.train_layer(index, stack, mean, std))
        finally:
            run.reader.close()
    finally:
        strategy.close()
    if learner.rank == 0:
        record = {
            "format": FORMAT, "splice": cfg.splice, "input_dim": run.input_dim,
            "cmvn": cfg.cmvn, "cmvn_norm_vars": cfg.cmvn_norm_vars,
            "mean": mean.cpu(), "std": std.cpu(),
            # copies: ma's average leaves the parameters views of one flat tensor
            "layers": [{**{k: v.detach().cpu().clone() for k, v in r.named_parameters()},
                        "gaussian": r.gaussian} for r in stack],
        }
        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            torch.save(record, tmp)
        with atomic_write(out / "pretrain.jsonl") as f:
            f.writelines(json.dumps(r) + "\n" for r in run.records)
        check.mark_done(["dbn.pt"])
    return path
