"""The training loop: one learner, any strategy, frame-level cross-entropy on pdf targets.

The loop knows no strategy: each step is asrdist.parallel.strategy.train_step (the hooks in
contract order), and ``strategy.sync`` comes before every checkpoint and held-out evaluation.
The trainer owns the step counter and passes it to the hooks. Rank and world size only choose
this learner's data shard and file names: the launcher (and everything it implies) stays
outside, in the CLI.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrdist.data.dataset import (
    IGNORE,
    ChunkStream,
    Corpus,
    UtteranceReader,
    check_sample,
    load_corpus,
    split_heldout,
    steps_per_epoch,
)
from asrdist.data.ingest import read_pdf_counts
from asrdist.errors import AsrdistError
from asrdist.models.build import build_model
from asrdist.models.dbn import init_dnn_from_dbn, load_dbn
from asrdist.models.final import FILENAME as FINAL
from asrdist.models.final import Exported, write_final
from asrdist.optim.build import build_optimizer
from asrdist.parallel.preempt import Preemption, StoppedEarly
from asrdist.parallel.strategy import Strategy, train_step
from asrdist.progress import Progress, progress
from asrdist.stage import (
    Skipped,
    check_done,
    record_done,
)
from asrdist.train.checkpoint import (
    capture_rng,
    list_checkpoints,
    load_checkpoint,
    remove_temp_files,
    restore_rng,
    save_checkpoint,
)
from asrdist.train.config import TrainConfig, save_config
from asrdist.train.evaluate import evaluate
from asrdist.train.identity import (
    check_resumed_run,
    check_same_options,
    run_inputs,
    run_options,
    set_aside_finished_run,
)
from asrdist.train.interval import Interval
from asrdist.train.loss import frame_loss
from asrdist.train.metrics import MetricsWriter
from asrdist.train.noise_scale import NoiseProbe
from asrdist.train.prefetch import Prefetcher
from asrdist.train.priors import log_priors
from asrdist.train.resume import gather, report_fallback, resume_steps, survey
from asrdist.train.runlock import lock_run
from asrdist.train.schedule import make_schedule
from asrdist.train.spec_augment import check_fits, make_spec_augment, mask_generator
from asrdist.train.stream import EpochStream
from asrdist.train.vtlp import make_vtlp, read_mfcc_config

log = logging.getLogger(__name__)

Batch = tuple[torch.Tensor, torch.Tensor, int]  # features, targets, labelled frames


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
    config: TrainConfig, strategy: Strategy, rank: int = 0, world_size: int = 1,
    preemption: Preemption | None = None,
) -> TrainResult | Skipped:
    """Train one learner of ``world_size``; the strategy is closed at the end and on error.

    A run dir done with the same run (:mod:`asrdist.train.identity`: options, learner count,
    inputs by content) is skipped (Skipped). A finished run that is another one is never
    deleted unasked (:func:`~asrdist.train.identity.set_aside_finished_run`). All learners
    decide together (one gather, which also refuses learners started with different options).
    """
    failed = True
    lock = None
    try:
        out = Path(config.out)
        lock = lock_run(out, rank, world_size)
        options = run_options(config, world_size)
        check = check_done(out, "train", options, run_inputs(config), clear=False)
        verdicts = gather((options, check.done), rank, world_size)
        check_same_options(verdicts)
        if all(done for _, done in verdicts.values()):
            failed = False
            return check.skipped()
        if check.marker_mtime_ns is not None:
            set_aside_finished_run(config, check, rank)
        result = _Run(config, strategy, rank, world_size, preemption or Preemption(),
                      check.record).run()
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


def _device(name: str) -> torch.device:
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise AsrdistError(f"--device {name}: no CUDA device is available")
    return torch.device(name)


Augment = Callable[[torch.Tensor], torch.Tensor]


def _to_batch(xy: tuple[np.ndarray, np.ndarray], pin: bool, augments: list[Augment]) -> Batch:
    x, y = torch.from_numpy(xy[0]), torch.from_numpy(xy[1])
    for augment in augments:
        x = augment(x)
    if pin:
        x, y = x.pin_memory(), y.pin_memory()
    return x, y, int((xy[1] != IGNORE).sum())


class _Run:
    """State of one learner's run; ``run()`` is the whole of it."""

    def __init__(self, cfg: TrainConfig, strategy: Strategy, rank: int, world_size: int,
                 preemption: Preemption, identity: dict[str, Any]) -> None:
        self.cfg, self.strategy, self.rank, self.world_size = cfg, strategy, rank, world_size
        self.out = Path(cfg.out)
        self.preemption, self.preempted = preemption, False
        for path in remove_temp_files(self.out, rank):
            log.info("removed %s, left by an interrupted write", path)
        self.device = _device(cfg.device)
        self.precision = cfg.precision_on(self.device)
        self.scaler = self.precision.scaler()
        log.info("precision %s (LSTM in %s%s)", self.precision.name,
                 self.precision.describe()["lstm_dtype"],
                 ", gradients scaled" if self.scaler is not None else "")
        self.corpus: Corpus = load_corpus(cfg.data, cfg.targets, cfg.max_missing_targets)
        self.train_rows, self.heldout_rows = split_heldout(self.corpus, cfg.heldout_utts, cfg.seed)
        self.priors = log_priors(
            read_pdf_counts(cfg.targets, self.corpus.num_pdfs)
        )
        probe = UtteranceReader(self.corpus, cfg.cmvn, cfg.cmvn_norm_vars, None)
        self.input_dim = int(probe.read(int(self.train_rows[0]))[0].shape[1])
        check_sample(probe, rank, world_size)
        probe.close()
        check_fits(cfg.mask_options(), self.input_dim)
        self.augments = self._make_augments()
        self.epoch_stream = EpochStream(self.corpus, self.train_rows, cfg.data, cfg.chunk_len,
                                        cfg.batch_size, cfg.shuffle_buffer, cfg.seed, rank,
                                        world_size)
        self.steps_per_epoch = [self.epoch_stream.steps(e) for e in range(cfg.epochs)]
        self.schedule = make_schedule(cfg.schedule_options(), cfg.batch_size,
                                      self.steps_per_epoch, world_size, cfg.max_steps)
        torch.manual_seed(cfg.seed)  # the same initial weights on every learner
        self.model = build_model(cfg.model_config(), self.input_dim, self.corpus.num_pdfs)
        if cfg.init_dbn:
            init_dnn_from_dbn(self.model, load_dbn(cfg.init_dbn), cfg.init_dbn)
        self.model.to(self.device)
        torch.manual_seed(cfg.seed + 1 + rank)  # dropout and warps differ between learners
        random.seed(cfg.seed + 1 + rank)
        self.left = self.model.left_context
        self.right = self.model.right_context
        self.step = self.epoch = self.step_in_epoch = self.frames = 0
        self.wall_before = 0.0  # wall seconds of earlier sessions of this run
        self.interval = Interval.start(self.device)  # sums since the last metrics record
        # what this run is (its options and inputs, as check_done read them at the start): in
        # every checkpoint, compared by --resume, and in the done marker
        self.identity = identity
        self.changed: dict[str, list[Any]] = {}  # options a --resume-allow let change
        self.resume_state = self._find_resume_state()
        self.noise = self._make_noise_probe()

    # -- set-up ---------------------------------------------------------------------------

    def _make_augments(self) -> list[Augment]:
        """The training chunks' transforms, in order: the warp, then the masks (which set
        bands to the chunk's mean, a mean the warp would otherwise smear)."""
        augments = []
        if self.cfg.vtlp_warp:
            mfcc = read_mfcc_config(self.cfg.data, self.input_dim)
            augments.append(make_vtlp(self.cfg.vtlp_warp, mfcc))
        self.mask_rng = mask_generator(self.cfg.seed, self.rank)  # in checkpoints
        masks = make_spec_augment(self.cfg.mask_options(), self.mask_rng)
        return augments + ([masks] if masks is not None else [])

    def _make_noise_probe(self) -> NoiseProbe | None:
        """--noise-scale-every: across the learners when all step together, else on halves of
        this learner's batch."""
        if not self.cfg.noise_scale_every:
            return None
        with torch.random.fork_rng(devices=[]):  # its initial weights draw no training's
            twin = build_model(self.cfg.model_config(), self.input_dim, self.corpus.num_pdfs)
        across = self.world_size > 1 and len(self.lockstep_group) == self.world_size
        return NoiseProbe(twin.to(self.device), self.cfg.noise_scale_every, across,
                          self.world_size, self.device)

    def _find_resume_state(self) -> dict[str, Any] | None:
        group, period = self.strategy.lockstep()
        self.lockstep_group = group
        self.preemption.attach(group, period)
        mine = survey(self.out, self.rank, group)
        everyone = gather(mine, self.rank, self.world_size)
        existing = resume_steps(self.out, everyone, self.cfg.resume)[self.rank]
        if not self.cfg.resume:
            return None
        report_fallback(self.out, self.rank, mine, existing)
        if existing is None:
            return None
        state = load_checkpoint(self.out, self.rank, existing)
        if state["input_dim"] != self.input_dim:
            raise AsrdistError(
                f"feature dimension {self.input_dim} of {self.cfg.data} does not match the "
                f"model's input dimension {state['input_dim']} in the checkpoint of {self.out}"
            )
        if state["num_pdfs"] != self.corpus.num_pdfs:
            raise AsrdistError(
                f"{self.cfg.targets} has {self.corpus.num_pdfs} pdfs; the checkpoint of "
                f"{self.out} has {state['num_pdfs']}"
            )
        if state["model_config"] != self.cfg.model_config().to_dict():
            raise AsrdistError(f"the model options differ from the checkpoint's in {self.out}")
        if state["world_size"] != self.world_size and self.cfg.option("elastic"):
            log.warning("%s was trained by %d learner(s); --elastic: going on with %d, each "
                        "from its own rank's checkpoint", self.out, state["world_size"],
                        self.world_size)
        elif state["world_size"] != self.world_size:
            raise AsrdistError(
                f"{self.out} was trained by {state['world_size']} learner(s); resume it with "
                f"as many, not {self.world_size}"
            )
        self.changed = check_resumed_run(self.cfg, self.identity, state, self.rank)
        return state

    def _restore(self, optimizer: torch.optim.Optimizer) -> None:
        s = self.resume_state
        optimizer.load_state_dict(s["optimizer"])
        if self.scaler is not None and s["scaler"] is not None:  # None: trained unscaled
            self.scaler.load_state_dict(s["scaler"])
        self.strategy.load_state_dict(s["strategy"])
        restore_rng(s["rng"], self.device)
        self.mask_rng.set_state(s["mask_rng"])  # every format-2 checkpoint holds it
        self.step, self.epoch, self.step_in_epoch = s["step"], s["epoch"], s["step_in_epoch"]
        self.frames, self.wall_before = s["frames"], s["wall_s"]
        old_batch = s["run"]["options"]["batch_size"]
        if old_batch != self.cfg.batch_size and s["stream"] is not None:
            self._rebatch_epoch(old_batch, len(s["queued"]))
        self.interval = Interval.from_state(s["interval"], self.device)
        if self.noise is not None and s.get("noise_scale") is not None:
            self.noise.load_state_dict(s["noise_scale"])
        log.info("resuming %s at step %d (epoch %d)", self.out, self.step, self.epoch + 1)

    def _rebatch_epoch(self, old_batch: int, queued: int) -> None:
        """--resume-allow batch_size mid-epoch: the epoch goes on from the same data position
        (chunks consumed, not steps counted), so its steps are those done, the ``queued``
        batches made at the old size, and as many new-size batches as the chunks left in the
        smallest shard fill (every learner computes the same)."""
        chunks = steps_per_epoch(self.corpus, self.train_rows, self.cfg.chunk_len, 1,
                                 self.cfg.seed, self.epoch, self.world_size)
        done = self.step_in_epoch + queued
        steps = done + (chunks - done * old_batch) // self.cfg.batch_size
        log.info("--resume: --batch-size %d -> %d at step %d of epoch %d: %d steps in it "
                 "instead of %d", old_batch, self.cfg.batch_size, self.step_in_epoch,
                 self.epoch + 1, steps, self.steps_per_epoch[self.epoch])
        self.steps_per_epoch[self.epoch] = steps

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> TrainResult:
        cfg = self.cfg
        if self.resume_state is not None:
            self.model.load_state_dict(self.resume_state["model"])
        self.wrapped = wrapped = self.strategy.wrap_model(self.model)
        optimizer = build_optimizer(cfg.optimizer, wrapped, self.schedule.peak, cfg.momentum,
                                    cfg.nesterov, cfg.weight_decay, cfg.ng_options())
        if self.resume_state is not None:
            self._restore(optimizer)
        self.t0 = time.monotonic()
        self.metrics = MetricsWriter(
            self.out, self.rank, self.step if self.resume_state is not None else None
        )
        try:
            if self.rank == 0:
                save_config(cfg, self.out / "config.yaml")
            self.metrics.write(
                "start", step=self.step, wall_s=self._wall(), world_size=self.world_size,
                input_dim=self.input_dim, num_pdfs=self.corpus.num_pdfs,
                train_utts=len(self.train_rows), heldout_utts=len(self.heldout_rows),
                **self.precision.describe(),
                steps_per_epoch=self.steps_per_epoch, peak_lr=self.schedule.peak,
                resumed=self.resume_state is not None,
                **({"changed": self.changed} if self.changed else {}),
            )
            heldout = self._train_epochs(wrapped, optimizer)
            if self.preempted:
                self.strategy.stop_early(wrapped)
                return TrainResult(self.out, None, self.step, heldout, self.preemption.signal)
            try:
                self.strategy.finalize(wrapped)
            except StoppedEarly as e:  # done, but others were stopped: no average to export
                return TrainResult(self.out, None, self.step, heldout, str(e))
            # learner 0, or the lowest survivor of an elastic run that lost it
            exporter = self.rank == self.strategy.leader()
            if exporter and self.world_size > 1:  # the figures of the exported average
                heldout = self._heldout_of_average()
            final = self._export() if exporter else None
            return TrainResult(self.out, final, self.step, heldout)
        finally:
            self.metrics.close()

    def _train_epochs(self, wrapped: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        cfg = self.cfg
        reader = UtteranceReader(self.corpus, cfg.cmvn, cfg.cmvn_norm_vars, self.input_dim)
        heldout: dict[str, float] = {}
        try:
            while self.epoch < cfg.epochs and not self._stop():
                self._train_one_epoch(wrapped, optimizer, reader)
                if not self.preempted:  # a stop signal leaves little time: checkpoint only
                    heldout = self._heldout()
                if self.step_in_epoch == self.steps_per_epoch[self.epoch]:
                    self.epoch += 1
                    self.step_in_epoch = 0
                    self._checkpoint(optimizer, None)
                # else: stopped by --max-steps inside the epoch (checkpointed there)
        finally:
            reader.close()
        return heldout

    def _stream(self, reader: UtteranceReader) -> tuple[ChunkStream, int]:
        stream = self.epoch_stream.open(reader, self.epoch, self.left, self.right)
        return stream, self.steps_per_epoch[self.epoch]

    def _stop(self) -> bool:
        """--max-steps reached, or a stop signal's agreed step (both checkpointed there)."""
        return self.preempted or (bool(self.cfg.max_steps) and self.step >= self.cfg.max_steps)

    def _train_one_epoch(
        self, wrapped: torch.nn.Module, optimizer: torch.optim.Optimizer, reader: UtteranceReader
    ) -> None:
        """Train to the end of the epoch, or to --max-steps (checkpointed there)."""
        cfg = self.cfg
        stream, num_steps = self._stream(reader)
        ready: list[Batch] = []
        if self.resume_state is not None and self.resume_state["stream"] is not None:
            stream.load_state_dict(self.resume_state["stream"])
            ready = self.resume_state["queued"]
        self.resume_state = None
        pin = self.device.type == "cuda"
        left = num_steps - self.step_in_epoch
        prefetch: Prefetcher[Batch] = Prefetcher(
            lambda: _to_batch(stream.next_batch(), pin, self.augments), left - len(ready),
            ready,
            background=self.device.type == "cuda",
        )
        bar = progress(num_steps, f"epoch {self.epoch + 1}/{cfg.epochs}", "step",
                       initial=self.step_in_epoch, enabled=self.rank == self.strategy.leader())
        interval_t0 = time.monotonic()
        try:
            while self.step_in_epoch < num_steps:
                t_wait = time.monotonic()
                x, y, frames = prefetch.get()
                t_compute = time.monotonic()
                x = x.to(self.device, non_blocking=True)
                y = y.to(self.device, non_blocking=True)
                lr = self.schedule.lr_at(self.step, self.epoch)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                if self.noise is not None and self.noise.due(self.step):
                    self._measure_noise(x, y)
                loss = train_step(self.strategy, wrapped, optimizer, self.step,
                                  partial(self._loss, x=x, y=y), cfg.grad_clip, self.scaler)
                now = time.monotonic()
                self.interval.add(loss, frames, self.step, t_compute - t_wait, now - t_compute)
                self.step += 1
                self.step_in_epoch += 1
                self.frames += frames
                self.preempted = self.preemption.reached(self.step)
                bar.update(1)
                if self.interval.steps >= cfg.log_every:
                    self._log_train(lr, now - interval_t0, bar)
                    interval_t0 = time.monotonic()
                stop = self._stop()
                mid_epoch = self.step_in_epoch < num_steps
                if mid_epoch and (stop or (cfg.checkpoint_every
                                           and self.step % cfg.checkpoint_every == 0)):
                    self._checkpoint(optimizer, (stream, prefetch))
                if mid_epoch and cfg.heldout_every and self.step % cfg.heldout_every == 0:
                    self._heldout()
                if stop:
                    return
            self._check_loss()  # the end of the epoch: before held-out and its checkpoint
        finally:
            bar.close()
            prefetch.close()

    def _loss(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.precision.autocast_context():
            return frame_loss(model, x, y)

    def _measure_noise(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """A ``noise`` record: B_simple at this step's weights and batch (before the step)."""
        assert self.noise is not None
        t0 = time.monotonic()
        found = self.noise.measure(self.model, x, y, self._loss)  # reads back: a device sync
        if found is not None:
            self.metrics.write("noise", step=self.step, epoch=self.epoch + 1,
                               progress=self._progress(), wall_s=self._wall(),
                               frames=self.frames, measure_s=time.monotonic() - t0, **found)

    def _log_train(self, lr: float, seconds: float, bar: Progress) -> None:
        """Write a train record (the one read of the loss from the device) and start a new
        interval."""
        self._check_loss()
        iv = self.interval
        loss, fps = iv.mean_loss(), iv.frames / max(seconds, 1e-9)
        self.metrics.write(
            "train", step=self.step, epoch=self.epoch + 1,
            progress=self._progress(),
            wall_s=self._wall(), frames=self.frames, loss=loss, lr=lr,
            steps=iv.steps, frames_per_s=fps, data_wait_s=iv.data_wait_s,
            compute_s=iv.compute_s, **self._loss_scale(), **self.strategy.metrics(),
        )
        bar.set_postfix(loss=f"{loss:.3f}", fps=f"{fps:.0f}")
        self.interval = Interval.start(self.device)

    def _loss_scale(self) -> dict[str, float]:
        """fp16: the gradient scaler's current scale (a read from the device)."""
        return {} if self.scaler is None else {"loss_scale": self.scaler.get_scale()}

    def _check_loss(self) -> None:
        """Stop at a non-finite loss since the last record, naming its step (at the latest at
        the next record, checkpoint or end of epoch, so no checkpoint holds its weights)."""
        bad = self.interval.non_finite()
        if bad is None:
            return
        steps = list_checkpoints(self.out, self.rank)
        kept = f"last good checkpoint: {steps[max(steps)]}" if steps else "no checkpoint yet"
        raise AsrdistError(
            f"loss is {bad[1]} at step {bad[0] + 1} (epoch {self.epoch + 1}); training "
            f"stopped, {kept}; lower --lr or set --grad-clip"
        )

    def _progress(self) -> float:
        """Epochs done, fractional: the x axis of asrdist-plot's epoch panels."""
        return self.epoch + self.step_in_epoch / self.steps_per_epoch[self.epoch]

    def _wall(self) -> float:
        return self.wall_before + time.monotonic() - self.t0

    # -- held-out, checkpoints, export ------------------------------------------------------

    def _heldout(self) -> dict[str, float]:
        if len(self.heldout_rows) == 0:
            return {}
        self.strategy.sync(self.wrapped)
        held = evaluate(self.model, self.cfg, self.corpus, self.heldout_rows, self.input_dim,
                        self.device)
        self.metrics.write(
            "heldout", step=self.step, epoch=self.epoch + 1,
            progress=self._progress(),
            wall_s=self._wall(), frames=self.frames, heldout_frames=held.frames,
            **held.figures(), **self.strategy.metrics(),
        )
        return held.figures()

    def _heldout_of_average(self) -> dict[str, float]:
        """Held-out figures of the finalized (averaged) weights, recorded as ``final``."""
        if len(self.heldout_rows) == 0:
            return {}
        held = evaluate(self.model, self.cfg, self.corpus, self.heldout_rows, self.input_dim,
                        self.device)
        ended = self.epoch >= self.cfg.epochs
        self.metrics.write("heldout", step=self.step, epoch=min(self.epoch + 1, self.cfg.epochs),
                           final=True, progress=float(self.epoch) if ended else self._progress(),
                           wall_s=self._wall(), frames=self.frames,
                           heldout_frames=held.frames, **held.figures(),
                           **self.strategy.metrics())
        return held.figures()

    def _checkpoint(
        self,
        optimizer: torch.optim.Optimizer,
        data: tuple[ChunkStream, Prefetcher] | None,
    ) -> None:
        """Save everything to continue from here; ``data`` is None at an epoch boundary."""
        self._check_loss()
        queued = data[1].pending() if data else []
        # an asynchronous strategy merges the exchanges in flight: the weights to save
        self.strategy.sync(self.wrapped)
        state = {
            "step": self.step,
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "frames": self.frames,
            "wall_s": self._wall(),
            "interval": self.interval.state_dict(),
            "strategy": self.strategy.state_dict(),
            "model": self.model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "rng": capture_rng(self.device),
            "mask_rng": self.mask_rng.get_state(),
            "stream": data[0].state_dict() if data else None,
            "queued": queued,
            "input_dim": self.input_dim,
            "num_pdfs": self.corpus.num_pdfs,
            "model_config": self.cfg.model_config().to_dict(),
            "world_size": self.world_size,
            "run": self.identity,
            "noise_scale": self.noise.state_dict() if self.noise is not None else None,
        }
        save_checkpoint(self.out, self.rank, self.step, state, self.cfg.keep_checkpoints)

    def _export(self) -> Path:
        """final.pt: the finalized weights and everything decoding needs."""
        cfg = self.cfg
        path = write_final(self.out / FINAL, self.model, Exported(
            model_config=cfg.model_config(), input_dim=self.input_dim,
            num_pdfs=self.corpus.num_pdfs, log_priors=self.priors, cmvn=cfg.cmvn,
            cmvn_norm_vars=cfg.cmvn_norm_vars, left_context=self.left,
            right_context=self.right, chunk_len=cfg.chunk_len, steps=self.step, algo=cfg.algo,
            world_size=self.world_size, feats_layout=self.corpus.feats_layout))
        record_done(self.out, "train", self.identity, [FINAL], hash_inputs=True)
        return path

