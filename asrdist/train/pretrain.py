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
pass (the trainer's epoch stream, asrdist.data.stream), and the learners average their RBM's
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from asrdist.data.dataset import IGNORE, UtteranceReader, load_corpus
from asrdist.data.stream import EpochStream
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write
from asrdist.models.build import ModelConfig
from asrdist.models.dbn import FORMAT
from asrdist.models.rbm import RBM
from asrdist.options import POSITIVE, Options, component, fingerprint, option, require
from asrdist.parallel.launch.rendezvous import DEFAULT_TIMEOUT_S
from asrdist.parallel.options import ProcessOptions
from asrdist.parallel.processes.transport import with_transport
from asrdist.parallel.strategies.ma import MAOptions, ModelAveraging
from asrdist.parallel.strategy import Learner
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STATS_BATCHES = 20  # minibatches whose spliced frames give the normalisation
# the model options that shape the RBM stack, and the DNN it is the stack of
DBN_OPTIONS = ("splice", "hidden_layers", "hidden_units")
SIGMOID_DNN = {"type": "dnn", "activation": "sigmoid"}


@dataclass
class PretrainConfig(Options):
    """The options of asrdist-pretrain-rbm (each is a flag of the same name)."""

    data: str = option("", "features: Kaldi data dir or lhotse cuts manifest (as "
                       "asrdist-train)")
    targets: str = option("", "ingested alignment dir (only to read the same utterances as "
                          "asrdist-train)")
    out: str = option("", "output dir (dbn.pt, pretrain.jsonl)", fingerprint=False)
    # the DNN the stack initialises (asrdist-train --init-dbn): its options as asrdist-train
    # declares them, an RBM per hidden layer (--hidden-layers: RBMs to stack)
    net: ModelConfig = component(ModelConfig, only=DBN_OPTIONS, fixed=SIGMOID_DNN)
    epochs: int = option(1, "passes over the data per Bernoulli RBM (the Gaussian first "
                         "layer: twice)", check=POSITIVE)
    batch_size: int = option(16, "chunks per minibatch", check=POSITIVE)
    chunk_len: int = option(16, "frames per chunk", check=POSITIVE)
    lr: float = option(0.4, "learning rate of the Bernoulli-Bernoulli RBMs", check=POSITIVE)
    lr_gaussian: float = option(0.01, "learning rate of the Gaussian-Bernoulli first RBM",
                                check=POSITIVE)
    momentum: float = option(0.5, "momentum at the start of each RBM")
    momentum_high: float = option(0.9, "momentum after the first pass of each RBM")
    l2: float = option(0.0002, "weight cost (L2) of the RBM weights")
    avg_period: int = option(8, "minibatches between averages of the learners' RBMs (several "
                             "learners)", check=POSITIVE)
    cmvn: str = option("spk", "mean (and variance) normalisation (as asrdist-train)",
                       ("spk", "utt", "none"))
    cmvn_norm_vars: bool = option(False, "normalise variances too")
    shuffle_buffer: int = option(2048, "chunks in the shuffle buffer")
    seed: int = option(0, "seed of the weights and the data order")
    device: str = option("cpu", "cpu, cuda or cuda:N", fingerprint=False)
    exchange_timeout: float = option(DEFAULT_TIMEOUT_S, "seconds a rendezvous or any average "
                                     "may take; then the job ends naming the lost learner",
                                     check=POSITIVE, fingerprint=False)

    def process_options(self) -> ProcessOptions:
        """The learners' transport: no distance sampling (averages every few minibatches)."""
        return ProcessOptions(exchange_timeout=self.exchange_timeout, distance_every=0)

    def __post_init__(self) -> None:
        for name in ("data", "targets", "out"):
            if not getattr(self, name):
                raise AsrdistError(f"--{name} is required")
        super().__post_init__()
        require(self.net.hidden_layers > 0, "hidden_layers", self.net.hidden_layers,
                "be positive (an RBM per hidden layer)")
        if not 0 <= self.momentum <= self.momentum_high < 1:
            raise AsrdistError("--momentum and --momentum-high: need 0 <= momentum <= "
                               f"momentum-high < 1, got {self.momentum}, {self.momentum_high}")


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
        stream = self.epochs.open(self.reader, epoch, cfg.net.splice, cfg.net.splice)
        window = 2 * cfg.net.splice + 1
        for _ in range(steps):
            x, y = stream.next_batch()
            feats = torch.from_numpy(x).to(self.device)
            spliced = feats.unfold(1, window, 1).transpose(2, 3).flatten(2)
            keep = torch.from_numpy(y != IGNORE).to(self.device)
            yield spliced[keep], steps

    def normalisation(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation of the spliced frames (all learners' first
        minibatches), so the Gaussian RBM sees unit-variance inputs."""
        width = self.input_dim * (2 * self.cfg.net.splice + 1)
        total = torch.zeros(3, width, dtype=torch.float64, device=self.device)
        for i, (rows, _) in enumerate(self._batches()):
            r = rows.double()
            total[0] += r.sum(0)
            total[1] += (r * r).sum(0)
            total[2] += len(r)
            if i + 1 == STATS_BATCHES:
                break
        self.strategy.average([total])  # the ratios below are the learners' pooled ones
        mean = total[0] / total[2]
        var = (total[1] / total[2] - mean * mean).clamp(min=1e-8)
        return mean.float(), var.sqrt().float()

    def train_layer(self, index: int, below: list[RBM], mean: torch.Tensor,
                    std: torch.Tensor) -> RBM:
        """Train RBM ``index`` on the layers ``below``; every learner ends with the same one,
        the learners' average (after the last layer, the strategy's final average)."""
        cfg = self.cfg
        gaussian = index == 0
        visible = len(mean) if gaussian else cfg.net.hidden_units
        torch.manual_seed(cfg.seed + index)  # the same start on every learner
        rbm = RBM(visible, cfg.net.hidden_units, gaussian).to(self.device)
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
        if index + 1 < cfg.net.hidden_layers:
            self.strategy.average(rbm.parameters())
        else:  # all learners leave together: none loses the store while another still needs it
            self.strategy.finalize(rbm)
        checksum = sum(float(p.double().sum()) for p in rbm.parameters())
        log.info("RBM %d done: parameter sum %.9g", index + 1, checksum)  # equal on all learners
        return rbm


def pretrain(cfg: PretrainConfig, learner: Learner | None = None) -> Path | Skipped:
    """Train the RBM stack as ``learner`` (one alone by default) and write ``out/dbn.pt``
    (learner 0); a done run is skipped."""
    out = Path(cfg.out)
    # a done run rerun with other values of only the options that do not change the RBMs is
    # skipped (asrdist.stage)
    check = check_done(out, "pretrain", fingerprint(cfg), [cfg.data, cfg.targets])
    path = out / "dbn.pt"
    if check.done:
        return check.skipped()
    learner = with_transport(learner or Learner(), cfg.process_options())
    strategy = ModelAveraging(learner, MAOptions(
        avg_period=cfg.avg_period, batch_size=cfg.batch_size, chunk_len=cfg.chunk_len))
    try:
        run = _Pretrainer(cfg, strategy)
        try:
            mean, std = run.normalisation()
            stack: list[RBM] = []
            for index in range(cfg.net.hidden_layers):
                stack.append(run.train_layer(index, stack, mean, std))
        finally:
            run.reader.close()
    finally:
        strategy.close()
    if learner.rank == 0:
        record = {
            "format": FORMAT, "splice": cfg.net.splice, "input_dim": run.input_dim,
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
