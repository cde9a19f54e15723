"""The training loop: one learner, any strategy, frame-level cross-entropy on pdf targets or
a sequence objective over lattices (asrdist.train.sequence_step) from a cross-entropy model.

The loop knows no strategy: each step is asrdist.parallel.strategy.train_step (the hooks in
contract order), and ``strategy.sync`` comes before every checkpoint and held-out evaluation.
The trainer owns the step counter (:mod:`asrdist.train.position`) and passes it to the hooks.
The launcher stays outside (:func:`asrdist.parallel.launch.learner.run_learner`); the learners'
agreements (run lock, options, checkpoints held) go through the learner's transport, under its
liveness. The data are :mod:`asrdist.train.inputs`'s, resuming :mod:`asrdist.train.resume`'s.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from asrdist.data.dataset import ChunkStream, UtteranceReader
from asrdist.errors import AsrdistError
from asrdist.models.build import build_model
from asrdist.models.dbn import init_dnn_from_dbn, load_dbn
from asrdist.models.final import FILENAME as FINAL
from asrdist.models.final import Exported, load_final, write_final
from asrdist.optim.build import build_optimizer
from asrdist.parallel.processes.preempt import Preemption
from asrdist.parallel.processes.transport import connect
from asrdist.parallel.strategy import Learner, StoppedEarly, Strategy, train_step
from asrdist.parallel.transport import Transport
from asrdist.progress import progress
from asrdist.stage import Skipped, record_done
from asrdist.train.checkpoint import (
    Pruning,
    capture_rng,
    checkpoint_path,
    remove_temp_files,
    restore_rng,
    restoring,
    save_checkpoint,
)
from asrdist.train.config import TrainConfig, save_config
from asrdist.train.evaluate import evaluate
from asrdist.train.identity import claim_run_dir
from asrdist.train.inputs import Batch, TrainingData
from asrdist.train.loss import frame_loss
from asrdist.train.noise_scale import NoiseProbe
from asrdist.train.position import Position
from asrdist.train.prefetch import Prefetcher
from asrdist.train.records import Records
from asrdist.train.resume import Shape, find_resume_state
from asrdist.train.runlock import lock_run
from asrdist.train.schedule import make_schedule
from asrdist.train.sequence_data import SequenceBatch
from asrdist.train.sequence_step import SequenceObjective

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run produced; ``final`` is None on learners other than the exporter (learner 0,
    or the lowest survivor of an elastic run that lost it), and on all when
    a signal stopped the run (``stopped_by`` names it) after its checkpoint."""

    out: Path
    final: Path | None
    steps: int
    heldout: dict[str, float] = field(default_factory=dict)
    stopped_by: str | None = None


def train(
    config: TrainConfig, strategy: Strategy, learner: Learner | None = None,
    preemption: Preemption | None = None,
) -> TrainResult | Skipped:
    """Train ``learner`` (one alone by default; several come with their transport, from
    :func:`~asrdist.parallel.launch.learner.run_learner`); the strategy is closed at the end and on
    error. A run dir done with this run is skipped, one done with another set aside, all
    learners deciding together (:func:`~asrdist.train.identity.claim_run_dir`)."""
    learner = learner or Learner()
    comm = connect(learner)
    failed = True
    lock = None
    try:
        lock = lock_run(Path(config.out), learner.rank, comm.gather)
        check = claim_run_dir(config, learner.rank, learner.world_size, comm.gather)
        if isinstance(check, Skipped):
            failed = False
            return check
        result = _Run(config, strategy, comm, preemption or Preemption(), check.record).run()
        failed = False
        return result
    finally:
        # after an error, no teardown that waits on a peer: the failure policy prints and
        # posts this learner's error first, and the others end at once citing it
        if failed:
            strategy.abandon()
        strategy.close()
        if lock is not None:
            lock.release()


class _Run:
    """State of one learner's run; ``run()`` is the whole of it. ``identity``: what this run
    is (its options and inputs, as check_done read them at the start), in every checkpoint,
    compared by --resume, and in the done marker."""

    def __init__(self, cfg: TrainConfig, strategy: Strategy, comm: Transport,
                 preemption: Preemption, identity: dict[str, Any]) -> None:
        self.cfg, self.strategy, self.comm, self.identity = cfg, strategy, comm, identity
        self.rank, self.world_size = rank, world_size = comm.rank, comm.world_size
        self.out = Path(cfg.out)
        self.preemption, self.preempted = preemption, False
        for path in remove_temp_files(self.out, rank):
            log.info("removed %s, left by an interrupted write", path)
        self.device = cfg.torch_device()
        self.precision = cfg.precision_on(self.device)
        self.scaler = self.precision.scaler()
        log.info("precision %s (LSTM in %s%s)", self.precision.name,
                 self.precision.describe()["lstm_dtype"],
                 ", gradients scaled" if self.scaler is not None else "")
        self.data = data = TrainingData(cfg, rank, world_size)
        self.pos = Position(data.steps_per_epoch, self.device)
        self.schedule = make_schedule(cfg.schedule_options(), cfg.batch_size,
                                      data.steps_per_epoch, world_size, cfg.max_steps)
        torch.manual_seed(cfg.seed)  # the same initial weights on every learner
        self.model = self._new_model()
        if cfg.init_dbn:
            init_dnn_from_dbn(self.model, load_dbn(cfg.init_dbn), cfg.init_dbn)
        self.sequence = None
        if data.sequence is not None:
            self._init_from_final(cfg.init_model)
            self.sequence = SequenceObjective(cfg.objective, data.sequence.numerators.trans,
                                              data.priors, self.device)
        self.model.to(self.device)
        # a model's own steps around each training step (TDNN-F: its dropout schedule and
        # semi-orthogonal constraint), by the step and the share of --epochs done (not of
        # --max-steps, which a --resume may change), so a resumed run does the same
        self.before_step = getattr(self.model, "before_step", None)
        self.after_step = getattr(self.model, "after_step", None)
        self.total_steps = sum(data.steps_per_epoch)
        torch.manual_seed(cfg.seed + 1 + rank)  # dropout and warps differ between learners
        random.seed(cfg.seed + 1 + rank)
        group, period = strategy.lockstep()
        preemption.attach(group, period)
        self.pruning = Pruning(self.out, rank, cfg.keep_checkpoints, len(group), period)
        self.shape = Shape(data.input_dim, data.num_pdfs, cfg.model_config().to_dict(),
                           world_size)  # what a checkpoint resumed must match
        # and the options a --resume-allow let change
        self.resume_state, self.changed = find_resume_state(cfg, identity, self.shape, rank,
                                                            group, comm.gather)
        self.resumed_from = None if self.resume_state is None else \
            checkpoint_path(self.out, rank, self.resume_state["step"])
        self.noise = self._noise_probe(across=world_size > 1 and len(group) == world_size)

    def _new_model(self) -> torch.nn.Module:
        return build_model(self.cfg.model_config(), self.data.input_dim, self.data.num_pdfs)

    def _init_from_final(self, path: str) -> None:
        """The weights of the cross-entropy model a sequence run starts from: its model
        options (those of its model type), input dimension and pdfs must be this run's."""
        model, exported = load_final(path)
        ours, theirs = self.cfg.model_config().identity(), exported.model_config.identity()
        differ = [k for k in theirs.keys() | ours.keys() if ours.get(k) != theirs.get(k)]
        if differ or (exported.input_dim, exported.num_pdfs) != (self.data.input_dim,
                                                                 self.data.num_pdfs):
            said = ", ".join(f"{k} {theirs.get(k)} (here {ours.get(k)})"
                             for k in sorted(differ)[:3]) or (
                f"input {exported.input_dim} x {exported.num_pdfs} pdfs (here "
                f"{self.data.input_dim} x {self.data.num_pdfs})")
            raise AsrdistError(f"--init-model {path}: not a model of this run's shape: {said}")
        self.model.load_state_dict(model.state_dict())

    def _noise_probe(self, across: bool) -> NoiseProbe | None:
        """--noise-scale-every: ``across`` the learners, else on halves of the batch."""
        if not self.cfg.noise_scale_every:
            return None
        with torch.random.fork_rng(devices=[]):  # its initial weights draw no training's
            twin = self._new_model()
        return NoiseProbe(twin.to(self.device), self.cfg.noise_scale_every,
                          self.comm if across else None, self.device)

    def _restore(self, optimizer: torch.optim.Optimizer) -> None:
        s = self.resume_state
        steps = [("optimizer", lambda: optimizer.load_state_dict(s["optimizer"])),
                 ("scaler", self._restore_scaler),
                 ("strategy", lambda: self.strategy.load_state_dict(s["strategy"])),
                 ("rng", lambda: restore_rng(s["rng"], self.device)),
                 # every checkpoint since format 2 holds it
                 ("mask_rng", lambda: self.data.mask_rng.set_state(s["mask_rng"])),
                 ("interval", lambda: self.pos.load_state_dict(s)),
                 ("run", self._rebatch)]
        if self.noise is not None and s.get("noise_scale") is not None:
            steps.append(("noise_scale", lambda: self.noise.load_state_dict(s["noise_scale"])))
        for entry, restore in steps:
            with restoring(self.resumed_from, entry):
                restore()
        log.info("resuming %s at step %d (epoch %d)", self.out, self.pos.step,
                 self.pos.epoch + 1)

    def _restore_scaler(self) -> None:
        s = self.resume_state
        if self.scaler is not None and s["scaler"] is not None:  # None: trained unscaled
            self.scaler.load_state_dict(s["scaler"])

    def _rebatch(self) -> None:
        """A run resumed with another --batch-size: the epoch's position in the new batches."""
        s = self.resume_state
        old_batch = s["run"]["options"]["batch_size"]
        if old_batch != self.cfg.batch_size and s["stream"] is not None:
            self.pos.rebatch(len(s["queued"]), self.data.chunks_in_epoch(self.pos.epoch),
                             old_batch, self.cfg.batch_size)

    def _load_model(self) -> None:
        """The checkpoint's weights; one it lacks is a missing entry, not torch's list."""
        saved = self.resume_state["model"]
        with restoring(self.resumed_from, "model"):
            missing = [name for name in self.model.state_dict() if name not in saved]
            if missing:
                raise KeyError(missing[0])
            self.model.load_state_dict(saved)

    def run(self) -> TrainResult:
        cfg, pos, resumed = self.cfg, self.pos, self.resume_state is not None
        if resumed:
            self._load_model()
        self.wrapped = wrapped = self.strategy.wrap_model(self.model)
        optimizer = build_optimizer(cfg.optim, wrapped, self.schedule.peak, cfg.ng)
        if resumed:
            self._restore(optimizer)
        pos.start_clock()
        self.records = Records(self.out, self.rank, pos, resumed,
                               self.cfg.tensorboard_dir(self.rank))
        try:
            if self.rank == 0:
                save_config(cfg, self.out / "config.yaml")
            data = self.data
            self.records.start(
                world_size=self.world_size, input_dim=data.input_dim, num_pdfs=data.num_pdfs,
                train_utts=len(data.train_rows), heldout_utts=len(data.heldout_rows),
                **self.precision.describe(), steps_per_epoch=pos.steps_per_epoch,
                peak_lr=self.schedule.peak, resumed=resumed,
                **({"changed": self.changed} if self.changed else {}))
            if self.sequence is not None and not resumed:
                self._heldout()  # the CE model's figures, objective included: where it starts
            heldout = self._train_epochs(wrapped, optimizer)
            if self.preempted:
                self.strategy.stop_early(wrapped)
                return TrainResult(self.out, None, pos.step, heldout, self.preemption.signal)
            try:
                self.strategy.finalize(wrapped)
            except StoppedEarly as e:  # done, but others were stopped: no average to export
                return TrainResult(self.out, None, pos.step, heldout, str(e))
            # learner 0, or the lowest survivor of an elastic run that lost it
            exporter = self.rank == self.strategy.leader()
            if exporter and self.world_size > 1:  # the figures of the exported average
                heldout = self._heldout(final=True)
            final = self._export() if exporter else None
            return TrainResult(self.out, final, pos.step, heldout)
        finally:
            self.records.close()

    def _train_epochs(self, wrapped: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        pos, reader = self.pos, self.data.reader()
        heldout: dict[str, float] = {}
        try:
            while pos.epoch < self.cfg.epochs and not self._stop():
                self._train_one_epoch(wrapped, optimizer, reader)
                if not self.preempted:  # a stop signal leaves little time: checkpoint only
                    heldout = self._heldout()
                if pos.steps_left() == 0:
                    pos.next_epoch()
                    self._checkpoint(optimizer, None)
                # else: stopped by --max-steps inside the epoch (checkpointed there)
        finally:
            reader.close()
        return heldout

    def _stop(self) -> bool:
        """--max-steps reached, or a stop signal's agreed step (both checkpointed there)."""
        limit = self.cfg.max_steps
        return self.preempted or (bool(limit) and self.pos.step >= limit)

    def _train_one_epoch(
        self, wrapped: torch.nn.Module, optimizer: torch.optim.Optimizer, reader: UtteranceReader
    ) -> None:
        """Train to the end of the epoch, or to --max-steps (checkpointed there)."""
        cfg, pos, model = self.cfg, self.pos, self.model
        stream = self.data.open(reader, pos.epoch, model.left_context, model.right_context)
        ready: list[Batch] = []
        if self.resume_state is not None and self.resume_state["stream"] is not None:
            with restoring(self.resumed_from, "stream"):
                stream.load_state_dict(self.resume_state["stream"])
            ready = self.resume_state["queued"]
        self.resume_state = None
        cuda = self.device.type == "cuda"
        # a sequence batch holds lattices, which a checkpoint does not: made when taken
        prefetch: Prefetcher[Batch | SequenceBatch] = Prefetcher(
            partial(self.data.batch, stream, cuda and self.sequence is None),
            pos.steps_left() - len(ready), ready, background=cuda and self.sequence is None)
        num_steps = pos.steps_per_epoch[pos.epoch]
        bar = progress(num_steps, f"epoch {pos.epoch + 1}/{cfg.epochs}", "step",
                       initial=pos.step_in_epoch, enabled=self.rank == self.strategy.leader())
        interval_t0 = time.monotonic()
        try:
            while pos.steps_left() > 0:
                t_wait = time.monotonic()
                batch = prefetch.get()
                t_compute = time.monotonic()
                lr = self.schedule.lr_at(pos.step, pos.epoch)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                step_loss, frames = self._step_loss(batch)
                if self.before_step is not None:
                    self.before_step(pos.step / self.total_steps)
                loss = train_step(self.strategy, wrapped, optimizer, pos.step, step_loss,
                                  cfg.grad_clip, self.scaler)
                if self.after_step is not None:
                    self.after_step(pos.step + 1)
                now = time.monotonic()
                pos.interval.add(loss, frames, pos.step, t_compute - t_wait, now - t_compute)
                pos.stepped(frames)
                self.pruning.stepped(pos.step)
                self.preempted = self.preemption.reached(pos.step)
                bar.update(1)
                if pos.interval.steps >= cfg.log_every:
                    loss_now, fps = self.records.train(lr, now - interval_t0, self.scaler,
                                                       **self.strategy.metrics())
                    bar.set_postfix(loss=f"{loss_now:.3f}", fps=f"{fps:.0f}")
                    interval_t0 = time.monotonic()
                stop, mid_epoch = self._stop(), pos.steps_left() > 0
                if mid_epoch and (stop or _due(pos.step, cfg.checkpoint_every)):
                    self._checkpoint(optimizer, (stream, prefetch))
                if mid_epoch and _due(pos.step, cfg.heldout_every):
                    self._heldout()
                if stop:
                    return
            self.records.check_loss()  # the epoch's end: before held-out and its checkpoint
        finally:
            bar.close()
            prefetch.close()

    def _step_loss(self, batch: Batch | SequenceBatch
                   ) -> tuple[partial[torch.Tensor], int]:
        """This step's loss of the model, on the device, and its labelled frames (the
        gradient noise measured first when due: cross-entropy only)."""
        if isinstance(batch, SequenceBatch):
            on_device = batch.to(self.device)
            return partial(self._sequence_loss, batch=on_device), on_device.frames
        x, y, frames = batch
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        if self.noise is not None and self.noise.due(self.pos.step):
            self._measure_noise(x, y)
        return partial(self._loss, x=x, y=y), frames

    def _sequence_loss(self, model: torch.nn.Module, batch: SequenceBatch) -> torch.Tensor:
        assert self.sequence is not None
        with self.precision.autocast_context():
            return self.sequence.loss(model, batch)

    def _loss(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast_context():
            return frame_loss(model, x, y)

    def _measure_noise(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """A ``noise`` record: B_simple at this step's weights and batch (before the step)."""
        assert self.noise is not None
        t0 = time.monotonic()
        found = self.noise.measure(self.model, x, y, self._loss)  # reads back: a device sync
        if found is not None:
            self.records.noise(time.monotonic() - t0, found)

    def _heldout(self, final: bool = False) -> dict[str, float]:
        """Held-out figures now, into a ``heldout`` record; ``final``: of the finalized
        (averaged) weights, after training (no sync: the strategy is finalized)."""
        data = self.data
        if len(data.heldout_rows) == 0:
            return {}
        if not final:
            self.strategy.sync(self.wrapped)
        held = evaluate(self.model, self.cfg, data.corpus, data.heldout_rows, data.input_dim,
                        self.device)
        figures = {**held.figures(), **self._heldout_sequence()}
        lost = self._lost() if final else []
        self.records.heldout(held.frames, figures, final, self.cfg.epochs,
                             **self.strategy.metrics(),
                             **({"learners_lost": lost} if lost else {}))
        return figures

    def _heldout_sequence(self) -> dict[str, float]:
        """The sequence objective per frame on the held-out utterances with lattices."""
        if self.sequence is None or self.data.sequence is None:
            return {}
        reader = self.data.reader()
        try:
            batches = self.data.sequence.heldout_batches(
                reader, self.cfg.chunk_len, self.model.left_context, self.model.right_context)
            return self.sequence.evaluate(self.model, batches, self.device)
        finally:
            reader.close()

    def _lost(self) -> list[dict[str, int]]:
        """The learners an elastic run dropped and the step each left at, for final.pt and
        the final record (its world_size is the learners started)."""
        return [{"rank": r, "step": s} for r, s in sorted(self.comm.departed().items())]

    def _checkpoint(self, optimizer: torch.optim.Optimizer,
                    data: tuple[ChunkStream, Prefetcher] | None) -> None:
        """Save everything to continue from here; ``data`` is None at an epoch boundary."""
        self.records.check_loss()
        queued = data[1].pending() if data else []
        # an asynchronous strategy merges the exchanges in flight: the weights to save
        self.strategy.sync(self.wrapped)
        state = {
            **self.pos.state_dict(),
            "strategy": self.strategy.state_dict(),
            "model": self.model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "rng": capture_rng(self.device),
            "mask_rng": self.data.mask_rng.get_state(),
            "stream": data[0].state_dict() if data else None,
            "queued": queued,
            **asdict(self.shape),
            "run": self.identity,
            "noise_scale": self.noise.state_dict() if self.noise is not None else None,
        }
        save_checkpoint(self.out, self.rank, self.pos.step, state)
        self.pruning.saved(self.pos.step)

    def _export(self) -> Path:
        """final.pt: the finalized weights and everything decoding needs."""
        cfg, data, model = self.cfg, self.data, self.model
        path = write_final(self.out / FINAL, model, Exported(
            model_config=cfg.model_config(), input_dim=data.input_dim,
            num_pdfs=data.num_pdfs, log_priors=data.priors, cmvn=cfg.cmvn,
            cmvn_norm_vars=cfg.cmvn_norm_vars, left_context=model.left_context,
            right_context=model.right_context, chunk_len=cfg.chunk_len, steps=self.pos.step,
            algo=cfg.algo, world_size=self.world_size, learners_lost=self._lost(),
            feats_layout=data.corpus.feats_layout, feats_config=data.corpus.feats_config))
        record_done(self.out, "train", self.identity, [FINAL], hash_inputs=True)
        return path


def _due(step: int, every: int) -> bool:
    """Whether an every-N-steps action (0 = never) falls on ``step``."""
    return bool(every) and step % every == 0
