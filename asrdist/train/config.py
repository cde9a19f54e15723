"""Every training option in one dataclass: defaults < YAML config file < command-line flags.

The CLI makes one flag per field (``chunk_len`` -> ``--chunk-len``) from the help text kept
here, so a value can never be settable in YAML and missing on the command line, or the
reverse; the run dir's config.yaml holds every value used and can be passed back as --config.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.models.build import MODEL_TYPES, ModelConfig
from asrdist.parallel.slow import parse_slow_learner


def _opt(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class TrainConfig:
    """Options of one training run (see each field's help)."""

    data: str = _opt("", "features: Kaldi data dir (feats.scp, utt2spk, cmvn.scp, "
                     "utt2num_frames) or a lhotse cuts manifest (.jsonl.gz) with features")
    targets: str = _opt("", "ingested alignment dir (pdf.scp, num_pdfs, pdf_counts)")
    out: str = _opt("", "run dir to write")
    model: str = _opt("blstm", "acoustic model type", MODEL_TYPES)
    layers: int = _opt(4, "BLSTM: layers")
    units: int = _opt(512, "BLSTM: cells per direction")
    bottleneck: int = _opt(0, "BLSTM: linear bottleneck before the output layer (0 = none)")
    splice: int = _opt(5, "DNN: frames of context either side of each frame")
    hidden_layers: int = _opt(6, "DNN: hidden layers")
    hidden_units: int = _opt(1024, "DNN: units per hidden layer")
    dropout: float = _opt(0.0, "dropout between layers")
    chunk_len: int = _opt(21, "labelled frames per training chunk (IBM: 21)")
    batch_size: int = _opt(256, "chunks per learner per step")
    epochs: int = _opt(10, "passes over the training data")
    max_steps: int = _opt(0, "stop after this many steps in all (0 = no limit)")
    seed: int = _opt(0, "seed of weights, data order and held-out choice")
    lr: float = _opt(0.1, "learning rate at a global batch of --lr-ref-batch chunks")
    lr_ref_batch: int = _opt(256, "global batch (chunks) at which --lr applies")
    lr_scaling: str = _opt("linear", "how the peak learning rate follows the global batch "
                           "(batch-size x learners)", ("linear", "sqrt", "none"))
    warmup_epochs: float = _opt(1.0, "linear warm-up from --lr to the scaled peak, in epochs")
    anneal_start: int = _opt(6, "first epoch (counted from 1) whose learning rate is annealed")
    anneal_factor: float = _opt(math.sqrt(2), "divide the learning rate by this every epoch "
                                "from --anneal-start on (IBM: sqrt 2)")
    momentum: float = _opt(0.9, "SGD momentum")
    nesterov: bool = _opt(False, "Nesterov momentum")
    weight_decay: float = _opt(0.0, "L2 weight decay")
    grad_clip: float = _opt(0.0, "clip the gradient's total norm to this (0 = off)")
    cmvn: str = _opt("spk", "mean (and variance) normalisation: per speaker from cmvn.scp, "
                     "per utterance, or none", ("spk", "utt", "none"))
    cmvn_norm_vars: bool = _opt(False, "normalise variances too (apply-cmvn --norm-vars)")
    shuffle_buffer: int = _opt(8192, "chunks in the shuffle buffer (memory is about "
                               "buffer x chunk frames x dim x 4 bytes)")
    heldout_utts: int = _opt(100, "utterances held out for cross-entropy and frame accuracy")
    heldout_every: int = _opt(0, "also evaluate held-out every this many steps (0 = per epoch)")
    checkpoint_every: int = _opt(500, "write a checkpoint every this many steps (and per epoch)")
    keep_checkpoints: int = _opt(2, "checkpoints kept per learner")
    log_every: int = _opt(10, "steps per metrics.jsonl record")
    max_missing_targets: float = _opt(0.05, "fail when more than this fraction of the "
                                      "utterances has no targets")
    device: str = _opt("cpu", "cpu, cuda or cuda:N")
    bf16: bool = _opt(False, "bf16 autocast for forward and loss")
    algo: str = _opt("single", "distributed strategy (asrdist.parallel.registry)")
    exchange_timeout: float = _opt(120.0, "seconds a rendezvous or any exchange may take; "
                                   "then the job ends naming the lost learner")
    slow_learner: str = _opt("", "RANK:FACTOR: make learner RANK FACTOR times slower "
                             "(straggler studies)")
    distance_every: float = _opt(30.0, "seconds between samples of each learner's distance "
                                 "to the learners' mean (0 = off)")
    avg_period: int = _opt(8, "ma: local steps between weight averages")
    learners_per_node: int = _opt(0, "hadpsgd: learners per super-learner, in consecutive "
                                  "ranks (0 = the launcher's nodes)")
    hadpsgd_variant: str = _opt("fixed", "hadpsgd: ADPSGD variant among super-learners",
                                ("fixed", "random", "delay1"))
    resume: bool = _opt(False, "continue from the newest checkpoint in --out")

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            type=self.model,
            layers=self.layers,
            units=self.units,
            bottleneck=self.bottleneck,
            splice=self.splice,
            hidden_layers=self.hidden_layers,
            hidden_units=self.hidden_units,
            dropout=self.dropout,
        )

    def strategy_options(self, accepted: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
        """The keyword arguments for a strategy that takes the options ``accepted``, and the
        flags set to a non-default value that it does not take (ignored; the caller warns)."""
        options: dict[str, Any] = {}
        ignored = []
        for name, option in STRATEGY_OPTIONS.items():
            value = getattr(self, name)
            if option in accepted:
                options[option] = value
            elif name != "seed" and value != FIELDS[name].default:
                ignored.append(f"--{name.replace('_', '-')} {value}")
        return options, ignored

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FIELDS = {f.name: f for f in fields(TrainConfig)}
# Option -> the strategy keyword argument it sets (asrdist.parallel.registry.options_of names);
# a strategy gets only those it takes.
STRATEGY_OPTIONS = {
    "exchange_timeout": "timeout_s",
    "slow_learner": "slow_learner",
    "distance_every": "distance_every_s",
    "avg_period": "avg_period",
    "learners_per_node": "learners_per_node",
    "hadpsgd_variant": "hadpsgd_variant",
    "seed": "seed",
}
_POSITIVE = ("layers", "units", "hidden_layers", "hidden_units", "chunk_len", "batch_size",
             "epochs", "lr_ref_batch", "shuffle_buffer", "log_every", "keep_checkpoints",
             "anneal_start", "exchange_timeout", "avg_period")
_NON_NEGATIVE = ("bottleneck", "splice", "max_steps", "heldout_utts", "heldout_every",
                 "checkpoint_every", "warmup_epochs", "momentum", "weight_decay", "grad_clip",
                 "max_missing_targets", "dropout", "distance_every", "learners_per_node")


def _coerce(name: str, value: Any, where: str) -> Any:
    """``value`` as the type of field ``name``, or an error naming both."""
    kind = FIELDS[name].type
    bad = AsrdistError(f"{where}: {name}: {value!r} is not a valid {kind}")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise bad
    if kind == "int":
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise bad
    if kind == "float":
        if isinstance(value, bool):
            raise bad
        try:
            out = float(value)  # YAML 1.1 reads "1e-3" as a string
        except (TypeError, ValueError):
            raise bad from None
        if not math.isfinite(out):
            raise bad
        return out
    if not isinstance(value, str):
        raise bad
    return value


class _Loader(yaml.SafeLoader):
    """SafeLoader, except that a plain scalar holding ':' is a string: YAML 1.1 reads
    ``slow_learner: 1:3`` as the sexagesimal number 63, and no option is written with colons."""

    def resolve(self, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0] and ":" in value:
            return yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG
        return super().resolve(kind, value, implicit)


def read_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """A config file's values, checked against the known options."""
    try:
        with open(path) as f:
            raw = yaml.load(f, Loader=_Loader) or {}
    except (OSError, yaml.YAMLError) as e:
        raise AsrdistError(f"{path}: cannot read config ({str(e).splitlines()[0]})") from e
    if not isinstance(raw, dict):
        raise AsrdistError(f"{path}: a config file is a mapping of option: value")
    values = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in FIELDS:
            raise AsrdistError(f"{path}: unknown option {key!r}")
        values[name] = _coerce(name, value, str(path))
    return values


def make_config(
    yaml_path: str | os.PathLike | None = None, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """Defaults, then the YAML file, then ``overrides`` (flags given), validated."""
    values = read_yaml(yaml_path) if yaml_path else {}
    for name, value in (overrides or {}).items():
        values[name] = _coerce(name, value, f"--{name.replace('_', '-')}")
    config = TrainConfig(**values)
    validate(config)
    return config


def validate(config: TrainConfig) -> None:
    """Refuse values no run can use, naming the option."""
    for name in ("data", "targets", "out"):
        if not getattr(config, name):
            raise AsrdistError(f"--{name} is required (flag or config file)")
    for name, f in FIELDS.items():
        value = getattr(config, name)
        choices = f.metadata["choices"]
        if choices and value not in choices:
            raise AsrdistError(f"--{name.replace('_', '-')} {value!r}: choose one of "
                               f"{', '.join(choices)}")
        if name in _POSITIVE and value <= 0:
            raise AsrdistError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if name in _NON_NEGATIVE and value < 0:
            raise AsrdistError(f"--{name.replace('_', '-')} must not be negative, got {value}")
    if config.lr <= 0:
        raise AsrdistError(f"--lr must be positive, got {config.lr}")
    if config.anneal_factor < 1:
        raise AsrdistError(f"--anneal-factor must be at least 1, got {config.anneal_factor}")
    if config.dropout >= 1:
        raise AsrdistError(f"--dropout must be below 1, got {config.dropout}")
    if config.shuffle_buffer < config.batch_size:
        raise AsrdistError(f"--shuffle-buffer {config.shuffle_buffer} must hold at least "
                           f"--batch-size {config.batch_size} chunks")
    if not (config.device == "cpu" or config.device.startswith("cuda")):
        raise AsrdistError(f"--device {config.device!r}: use cpu, cuda or cuda:N")
    parse_slow_learner(config.slow_learner)


def validate_for_world(config: TrainConfig, world_size: int) -> None:
    """Refuse options that do not fit the number of learners the launcher started."""
    slow = parse_slow_learner(config.slow_learner)
    if slow is not None and slow[0] >= world_size:
        raise AsrdistError(f"--slow-learner {config.slow_learner}: there is no learner "
                           f"{slow[0]} among {world_size} (ranks 0..{world_size - 1})")
    if config.algo == "single" and world_size > 1:
        raise AsrdistError(f"--algo single trains one learner but the launcher started "
                           f"{world_size}: choose a distributed --algo (e.g. ssgd)")


def save_config(config: TrainConfig, path: str | os.PathLike) -> None:
    """config.yaml: every value used, readable back with --config."""
    with atomic_write(Path(path)) as f:
        yaml.safe_dump(config.to_dict(), f, sort_keys=False)
