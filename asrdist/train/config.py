"""Every training option in one dataclass: defaults < YAML config file < command-line flags.

The CLI makes one flag per option (``chunk_len`` -> ``--chunk-len``) from the help text kept
here, so a value can never be settable in YAML and missing on the command line, or the
reverse; the run dir's config.yaml holds every value used and can be passed back as --config.
The strategies' options are not listed here: each strategy declares and checks its own
(asrdist.parallel.options), and the registry's union of them are keys and flags like any
other, held in ``TrainConfig.strategy_options``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from asrdist.errors import AsrdistError, first_line
from asrdist.fsutil import atomic_write
from asrdist.models.build import ACTIVATIONS, MODEL_TYPES, ModelConfig
from asrdist.optim.build import OPTIMIZERS
from asrdist.optim.ngsgd import NGOptions
from asrdist.parallel import registry
from asrdist.parallel.options import flag
from asrdist.train.spec_augment import MaskOptions


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
    chunk_left_context: int = _opt(0, "BLSTM: extra input frames before each training chunk, "
                                   "not labelled (Kaldi's chunk-left-context: 40)")
    chunk_right_context: int = _opt(0, "BLSTM: extra input frames after each training chunk, "
                                    "not labelled (Kaldi's chunk-right-context: 40)")
    splice: int = _opt(5, "DNN: frames of context either side of each frame")
    hidden_layers: int = _opt(6, "DNN: hidden layers")
    hidden_units: int = _opt(1024, "DNN: units per hidden layer")
    activation: str = _opt("relu", "DNN: hidden activation (sigmoid: Kaldi nnet1, Su & Chen, "
                           "needed by --init-dbn)", ACTIVATIONS)
    init_dbn: str = _opt("", "DNN: initialise the hidden layers from this RBM stack "
                         "(asrdist-pretrain-rbm's dbn.pt)")
    dropout: float = _opt(0.0, "dropout between layers")
    feature_masks: int = _opt(0, "SpecAugment: bands of input dims masked per training chunk "
                              "(0 = none)")
    feature_mask_width: int = _opt(2, "SpecAugment: the widest band, in input dims")
    time_masks: int = _opt(0, "SpecAugment: runs of frames masked per training chunk "
                           "(0 = none; 15 % of a chunk's frames at most in all)")
    time_mask_width: int = _opt(2, "SpecAugment: the longest run, in frames")
    vtlp_warp: float = _opt(0.0, "VTLP: warp each MFCC training chunk's frequency axis by a "
                            "factor drawn from [1 - W, 1 + W] (0 = none)")
    chunk_len: int = _opt(21, "labelled frames per training chunk (IBM: 21)")
    batch_size: int = _opt(256, "chunks per learner per step")
    epochs: int = _opt(10, "passes over the training data")
    max_steps: int = _opt(0, "stop after this many steps in all (0 = no limit)")
    seed: int = _opt(0, "seed of weights, data order and held-out choice")
    lr: float = _opt(0.1, "learning rate at a global batch of --lr-ref-batch chunks")
    lr_schedule: str = _opt("ibm", "learning-rate rule: ibm (batch scaling, warm-up, per-epoch "
                            "annealing) or kaldi (learners x --lr decaying exponentially to "
                            "--lr-final; Kaldi's parameter averaging)", ("ibm", "kaldi"))
    lr_final: float = _opt(0.01, "kaldi schedule: the effective learning rate at the end")
    lr_ref_batch: int = _opt(256, "global batch (chunks) at which --lr applies")
    lr_scaling: str = _opt("linear", "how the peak learning rate follows the global batch "
                           "(batch-size x learners)", ("linear", "sqrt", "none"))
    warmup_epochs: float = _opt(1.0, "linear warm-up from --lr to the scaled peak, in epochs")
    anneal_start: int = _opt(6, "first epoch (counted from 1) whose learning rate is annealed")
    anneal_factor: float = _opt(math.sqrt(2), "divide the learning rate by this every epoch "
                                "from --anneal-start on (IBM: sqrt 2)")
    optimizer: str = _opt("sgd", "sgd, or ngsgd: Kaldi's online natural-gradient SGD on every "
                          "affine layer (the BLSTM's LSTM weights stay plain SGD)", OPTIMIZERS)
    ng_rank_in: int = _opt(20, "ngsgd: rank of the Fisher estimate of each layer's input")
    ng_rank_out: int = _opt(80, "ngsgd: rank of the Fisher estimate of each layer's output "
                            "derivative")
    ng_update_period: int = _opt(4, "ngsgd: minibatches between updates of the Fisher "
                                 "estimates (after the first 10)")
    ng_num_samples_history: float = _opt(2000.0, "ngsgd: time constant of the Fisher "
                                         "estimates, in rows (frames)")
    ng_alpha: float = _opt(4.0, "ngsgd: smoothing of the Fisher matrix with the identity")
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
    noise_scale_every: int = _opt(0, "measure the gradient noise scale B_simple (McCandlish et "
                                  "al. 2018) every this many steps into metrics.jsonl (0 = "
                                  "off); each costs a forward and backward of the local batch "
                                  "and, with learners in lockstep, an allreduce of the gradient")
    max_missing_targets: float = _opt(0.05, "fail when more than this fraction of the "
                                      "utterances has no targets")
    device: str = _opt("cpu", "cpu, cuda or cuda:N")
    bf16: bool = _opt(False, "bf16 autocast for forward and loss")
    algo: str = _opt("single", "distributed strategy (asrdist.parallel.registry)")
    resume: bool = _opt(False, "continue from the newest checkpoint in --out (a run finished "
                        "with other options or data is trained again from scratch, its "
                        "checkpoints, metrics and final.pt removed first)")
    resume_allow: str = _opt("", "with --resume, options whose value may differ from the "
                             "run's (comma-separated names, e.g. batch_size,lr; data and "
                             "targets cover their files too; all: any): a deliberate change, "
                             "logged and recorded in metrics.jsonl's start record; without it "
                             "--resume refuses any change of what the run is")
    stop_signals: str = _opt("TERM,USR1,INT", "signals that make every learner checkpoint and "
                             "exit with status 75 (Slurm's --signal, preemption, time limit; "
                             "Ctrl-C: a second one ends at once)")
    # every strategy's options by name (registry.option_fields), whatever --algo is
    strategy_options: dict[str, Any] = field(default_factory=dict)

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            type=self.model,
            layers=self.layers,
            units=self.units,
            bottleneck=self.bottleneck,
            chunk_left_context=self.chunk_left_context,
            chunk_right_context=self.chunk_right_context,
            splice=self.splice,
            hidden_layers=self.hidden_layers,
            hidden_units=self.hidden_units,
            dropout=self.dropout,
            activation=self.activation,
        )

    def mask_options(self) -> MaskOptions:
        return MaskOptions(self.feature_masks, self.feature_mask_width, self.time_masks,
                           self.time_mask_width)

    def ng_options(self) -> NGOptions:
        return NGOptions(self.ng_rank_in, self.ng_rank_out, self.ng_update_period,
                         self.ng_num_samples_history, self.ng_alpha)

    def option(self, name: str) -> Any:
        """The value of option ``name``, a training or a strategy option."""
        if name in FIELDS:
            return getattr(self, name)
        if name in self.strategy_options:
            return self.strategy_options[name]
        return strategy_fields()[name].default

    def options_for(self, algo: str) -> tuple[Any, list[str]]:
        """Strategy ``algo``'s options dataclass from this config, and the strategy options set
        to a non-default value that it does not take (ignored; the caller warns)."""
        taken = registry.options_of(algo)
        ignored = [f"{flag(name)} {self.option(name)}" for name, f in strategy_fields().items()
                   if name not in taken and self.option(name) != f.default]
        return registry.make_options(algo, {n: self.option(n) for n in taken}), ignored

    def to_dict(self) -> dict[str, Any]:
        """Every option by name, the strategies' included (config.yaml's keys)."""
        out = {name: getattr(self, name) for name in FIELDS}
        out.update((name, self.option(name)) for name in strategy_fields())
        return out


FIELDS = {f.name: f for f in fields(TrainConfig) if f.name != "strategy_options"}
_POSITIVE = ("layers", "units", "hidden_layers", "hidden_units", "chunk_len", "batch_size",
             "epochs", "lr_ref_batch", "shuffle_buffer", "log_every", "keep_checkpoints",
             "anneal_start", "ng_rank_in", "ng_rank_out", "ng_update_period",
             "ng_num_samples_history")
_NON_NEGATIVE = ("bottleneck", "chunk_left_context", "chunk_right_context", "splice",
                 "max_steps", "heldout_utts", "heldout_every", "checkpoint_every",
                 "noise_scale_every", "warmup_epochs", "momentum", "weight_decay", "grad_clip",
                 "max_missing_targets", "dropout", "ng_alpha")


def strategy_fields() -> dict[str, dataclasses.Field]:
    """The registered strategies' options that are not training options (``seed`` is one: a
    strategy that takes it gets the run's seed)."""
    return {n: f for n, f in registry.option_fields().items() if n not in FIELDS}


def all_fields() -> dict[str, dataclasses.Field]:
    """Every option, training and strategy: the YAML keys and asrdist-train's flags."""
    return {**FIELDS, **strategy_fields()}


def field_kind(f: dataclasses.Field) -> str:
    """"int", "float", "str" or "bool", whether or not the annotations are strings."""
    return f.type if isinstance(f.type, str) else f.type.__name__


def coerce_option(name: str, value: Any, where: str) -> Any:
    """``value`` as the type of option ``name``, or an error naming both."""
    kind = field_kind(all_fields()[name])
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
        raise AsrdistError(f"{path}: cannot read config ({first_line(e)})") from e
    if not isinstance(raw, dict):
        raise AsrdistError(f"{path}: a config file is a mapping of option: value")
    values = {}
    known = all_fields()
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise AsrdistError(f"{path}: unknown option {key!r}")
        values[name] = coerce_option(name, value, str(path))
    return values


def make_config(
    yaml_path: str | os.PathLike | None = None, overrides: dict[str, Any] | None = None
) -> TrainConfig:
    """Defaults, then the YAML file, then ``overrides`` (flags given), validated."""
    values = read_yaml(yaml_path) if yaml_path else {}
    for name, value in (overrides or {}).items():
        values[name] = coerce_option(name, value, flag(name))
    options = {n: values.pop(n, f.default) for n, f in strategy_fields().items()}
    config = TrainConfig(**values, strategy_options=options)
    validate(config)
    return config


def validate(config: TrainConfig) -> None:
    """Refuse values no run can use, naming the option."""
    for name in ("data", "targets", "out"):
        if not getattr(config, name):
            raise AsrdistError(f"--{name} is required (flag or config file)")
    for name, f in all_fields().items():
        value = config.option(name)
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
    if config.lr_final <= 0:
        raise AsrdistError(f"--lr-final must be positive, got {config.lr_final}")
    if config.anneal_factor < 1:
        raise AsrdistError(f"--anneal-factor must be at least 1, got {config.anneal_factor}")
    if not 0 <= config.vtlp_warp < 0.5:
        raise AsrdistError(f"--vtlp-warp must be in [0, 0.5), got {config.vtlp_warp}")
    if config.dropout >= 1:
        raise AsrdistError(f"--dropout must be below 1, got {config.dropout}")
    if config.shuffle_buffer < config.batch_size:
        raise AsrdistError(f"--shuffle-buffer {config.shuffle_buffer} must hold at least "
                           f"--batch-size {config.batch_size} chunks")
    if config.init_dbn and (config.model != "dnn" or config.activation != "sigmoid"):
        raise AsrdistError("--init-dbn initialises a sigmoid DNN: set --model dnn and "
                           "--activation sigmoid")
    if not (config.device == "cpu" or config.device.startswith("cuda")):
        raise AsrdistError(f"--device {config.device!r}: use cpu, cuda or cuda:N")
    for name in resume_allowed(config):
        if name != "all" and name not in all_fields():
            raise AsrdistError(f"--resume-allow: {name!r} is not an option")
    config.mask_options()  # checks its values when made
    _every_strategys_options(config)  # each options dataclass checks its values when made


def resume_allowed(config: TrainConfig) -> set[str]:
    """The option names --resume-allow lists (``all``: any)."""
    return {n.strip().lstrip("-").replace("-", "_")
            for n in config.resume_allow.split(",") if n.strip()}


def _every_strategys_options(config: TrainConfig) -> list[Any]:
    """Every registered strategy's options made from ``config``: one config file serves every
    --algo, so a bad value is refused whichever strategy this run uses."""
    made = {}
    for spec in registry.specs().values():
        if spec.options not in made:
            names = [f.name for f in fields(spec.options)]
            made[spec.options] = spec.options(**{n: config.option(n) for n in names})
    return list(made.values())


def validate_for_world(config: TrainConfig, world_size: int) -> None:
    """Refuse options that do not fit the number of learners the launcher started (an options
    dataclass may define ``check_world(world_size)``)."""
    for options in _every_strategys_options(config):
        check = getattr(options, "check_world", None)
        if check is not None:
            check(world_size)
    if not registry.spec(config.algo).multi_learner and world_size > 1:
        raise AsrdistError(f"--algo {config.algo} trains one learner but the launcher started "
                           f"{world_size}: choose a distributed --algo (e.g. ssgd)")


def save_config(config: TrainConfig, path: str | os.PathLike) -> None:
    """config.yaml: every value used, readable back with --config."""
    with atomic_write(Path(path)) as f:
        yaml.safe_dump(config.to_dict(), f, sort_keys=False)
