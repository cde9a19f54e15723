"""Every training option in one dataclass: defaults < YAML config file < command-line flags.

The CLI makes one flag per option (``chunk_len`` -> ``--chunk-len``) from the declarations, so
a value can never be settable in YAML and missing on the command line, or the reverse; the run
dir's config.yaml holds every value used and can be passed back as --config. Each option is
declared once (asrdist.options): the trainer's own here; a component's where the component is
(the model's in asrdist.models.build, SpecAugment's, the data reading's, the optimizer's,
NG-SGD's, the learning-rate schedule's), whose options object the config holds as a field, its
options flat beside the trainer's (one flattener, asrdist.options.paths: a config.yaml is
flat, as before). An option that does not change what a run makes is declared
``fingerprint=False`` (asrdist.train.identity). The strategies' options are not listed here:
each strategy declares and checks its own (asrdist.parallel.options), and the registry's union
of them, after the learner processes' own (:class:`~asrdist.parallel.options.ProcessOptions`),
are keys and flags like any other, held in ``TrainConfig.strategy_options``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import yaml

from asrdist.data.options import DataOptions
from asrdist.errors import AsrdistError, first_line
from asrdist.fsutil import atomic_write
from asrdist.models.build import ModelConfig
from asrdist.optim.build import OptimizerOptions
from asrdist.optim.ngsgd import NGOptions
from asrdist.options import (
    NON_NEGATIVE,
    POSITIVE,
    check_fields,
    coerce,
    component,
    declared,
    flag,
    flatten,
    in_range,
    make,
    option,
    paths,
    value_of,
)
from asrdist.parallel import registry
from asrdist.parallel.options import ProcessOptions
from asrdist.train.objective import ObjectiveOptions
from asrdist.train.precision import PRECISIONS, Precision, choose_precision
from asrdist.train.schedule import ScheduleOptions
from asrdist.train.spec_augment import MaskOptions


@dataclass
class TrainConfig:
    """Options of one training run (see each field's help), composed of its components'
    options objects; every option reads as an attribute by its flat name too
    (``config.layers`` is ``config.net.layers``)."""

    data: str = option("", "features: Kaldi data dir (feats.scp, utt2spk, cmvn.scp, "
                       "utt2num_frames) or a lhotse cuts manifest (.jsonl.gz) with features")
    targets: str = option("", "ingested alignment dir (pdf.scp, num_pdfs, pdf_counts)")
    out: str = option("", "run dir to write", fingerprint=False)
    net: ModelConfig = component(ModelConfig)
    init_dbn: str = option("", "DNN: initialise the hidden layers from this RBM stack "
                           "(asrdist-pretrain-rbm's dbn.pt)")
    objective: ObjectiveOptions = component(ObjectiveOptions)
    masks: MaskOptions = component(MaskOptions)
    vtlp_warp: float = option(0.0, "VTLP: warp each MFCC training chunk's frequency axis by a "
                              "factor drawn from [1 - W, 1 + W] (0 = none)",
                              check=in_range(0, 0.5))
    reading: DataOptions = component(DataOptions)
    epochs: int = option(10, "passes over the training data", check=POSITIVE)
    max_steps: int = option(0, "stop after this many steps in all (0 = no limit)",
                            check=NON_NEGATIVE)
    seed: int = option(0, "seed of weights, data order and held-out choice")
    schedule: ScheduleOptions = component(ScheduleOptions)
    optim: OptimizerOptions = component(OptimizerOptions)
    ng: NGOptions = component(NGOptions)
    grad_clip: float = option(0.0, "clip the gradient's total norm to this (0 = off)",
                              check=NON_NEGATIVE)
    heldout_utts: int = option(100, "utterances held out for cross-entropy and frame accuracy "
                               "(originals: with utt2uniq, each with all its augmented copies)",
                               check=NON_NEGATIVE)
    heldout_every: int = option(0, "also evaluate held-out every this many steps (0 = per "
                                "epoch)", check=NON_NEGATIVE, fingerprint=False)
    checkpoint_every: int = option(500, "write a checkpoint every this many steps (and per "
                                   "epoch)", check=NON_NEGATIVE, fingerprint=False)
    keep_checkpoints: int = option(2, "checkpoints kept per learner (one more until the "
                                   "lockstep set next meets)", check=POSITIVE,
                                   fingerprint=False)
    log_every: int = option(10, "steps per metrics.jsonl record", check=POSITIVE,
                            fingerprint=False)
    tensorboard: str = option("", "TensorBoard event files' directory, every metrics.jsonl "
                              "figure (empty: --out; none: no event files; needs the "
                              "tensorboard extra)", fingerprint=False)
    tensorboard_all: bool = option(False, "every learner writes event files (learner r in "
                                   "DIR/learnerR), not learner 0 alone", fingerprint=False)
    # measured on a copy of the model, the random state put back: not the model's
    noise_scale_every: int = option(0, "measure the gradient noise scale B_simple (McCandlish "
                                    "et al. 2018) every this many steps into metrics.jsonl (0 = "
                                    "off); each costs a forward and backward of the local batch "
                                    "and, with learners in lockstep, an allreduce of the "
                                    "gradient", check=NON_NEGATIVE, fingerprint=False)
    max_missing_targets: float = option(0.05, "fail when more than this fraction of the "
                                        "utterances has no targets", check=NON_NEGATIVE)
    device: str = option("cpu", "cpu, cuda or cuda:N", fingerprint=False)
    precision: str = option("fp32", "forward and loss in fp32, or under bf16 or fp16 autocast "
                            "(fp16 with a gradient scaler; bf16 falls back to scaled fp16 where "
                            "torch/cuDNN would run the LSTM in fp16: the log and metrics.jsonl's "
                            "start record say which)", PRECISIONS)
    algo: str = option("single", "distributed strategy (asrdist.parallel.registry)")
    resume: bool = option(False, "continue from the newest checkpoint in --out (a run finished "
                          "there with other options or data is refused, and left as it is)",
                          fingerprint=False)
    discard_finished: bool = option(False, "a finished run in --out done with other options "
                                    "or inputs is deleted when a new one starts there (by "
                                    "default it is moved into OUT/superseded/)",
                                    fingerprint=False)
    resume_allow: str = option("", "with --resume, options whose value may differ from the "
                               "run's (comma-separated names, e.g. batch_size,lr; data and "
                               "targets cover their files too; all: any): a deliberate "
                               "change, logged and recorded in metrics.jsonl's start record; "
                               "without it --resume refuses any change of what the run is",
                               fingerprint=False)
    stop_signals: str = option("TERM,USR1,INT", "signals that make every learner checkpoint "
                               "and exit with status 75 (Slurm's --signal, preemption, time "
                               "limit; Ctrl-C: a second one ends at once)", fingerprint=False)
    # every strategy's options by name (registry.option_fields), whatever --algo is
    strategy_options: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A component's option by its flat name (called when no field has the name)."""
        if name.startswith("_") or name not in COMPONENT_OPTIONS:
            raise AttributeError(name)
        return value_of(self, name)

    def tensorboard_dir(self, rank: int) -> Path | None:
        """Where learner ``rank`` writes event files, or None (see --tensorboard)."""
        if self.tensorboard == "none" or (rank > 0 and not self.tensorboard_all):
            return None
        return Path(self.tensorboard or self.out)

    def model_config(self) -> ModelConfig:
        return self.net

    def mask_options(self) -> MaskOptions:
        return self.masks

    def schedule_options(self) -> ScheduleOptions:
        return self.schedule

    def torch_device(self) -> torch.device:
        """--device, refused when it names CUDA on a machine without it."""
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise AsrdistError(f"--device {self.device}: no CUDA device is available")
        return torch.device(self.device)

    def precision_on(self, device: torch.device) -> Precision:
        """What forward and loss run in on ``device`` (asrdist.train.precision)."""
        return choose_precision(self.precision, device, lstm=self.net.type == "blstm")

    def option(self, name: str) -> Any:
        """The value of option ``name``, a training or a strategy option."""
        if name in FIELDS:
            return value_of(self, name)
        if name in self.strategy_options:
            return self.strategy_options[name]
        return strategy_fields()[name].default

    def options_for(self, algo: str) -> tuple[Any, list[str]]:
        """Strategy ``algo``'s options dataclass from this config, and the strategy and
        process options set to a non-default value that a run of it does not take (ignored;
        the caller warns)."""
        taken = registry.options_of(algo)
        ignored = [f"{flag(name)} {self.option(name)}" for name, f in strategy_fields().items()
                   if name not in taken and self.option(name) != f.default]
        own = registry.algorithm_options(algo)
        return registry.make_options(algo, {n: self.option(n) for n in own}), ignored

    def process_options(self) -> ProcessOptions:
        """How this run's learner processes talk to each other (the launcher's)."""
        return make(ProcessOptions, {n: self.option(n) for n in declared(ProcessOptions)})

    def to_dict(self) -> dict[str, Any]:
        """Every option by name, the strategies' included (config.yaml's keys)."""
        return {**flatten(self), **{name: self.option(name) for name in strategy_fields()}}


FIELDS = declared(TrainConfig)
COMPONENT_OPTIONS = frozenset(n for n, (path, _) in paths(TrainConfig).items() if len(path) > 1)


def strategy_fields() -> dict[str, dataclasses.Field]:
    """The registered strategies' options that are not training options (``seed`` is one: a
    strategy that takes it gets the run's seed)."""
    return {n: f for n, f in registry.option_fields().items() if n not in FIELDS}


def all_fields() -> dict[str, dataclasses.Field]:
    """Every option, training and strategy: the YAML keys and asrdist-train's flags."""
    return {**FIELDS, **strategy_fields()}


def coerce_option(name: str, value: Any, where: str) -> Any:
    """``value`` as the type of option ``name``, or an error naming both."""
    return coerce(name, all_fields()[name], value, where)


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
    config = make(TrainConfig, values)
    config.strategy_options = options
    validate(config)
    return config


def validate(config: TrainConfig) -> None:
    """Refuse values no run can use, naming the option."""
    for name in ("data", "targets", "out"):
        if not getattr(config, name):
            raise AsrdistError(f"--{name} is required (flag or config file)")
    check_fields(config)  # each option as declared; the strategies' below
    if config.shuffle_buffer < config.batch_size:
        raise AsrdistError(f"--shuffle-buffer {config.shuffle_buffer} must hold at least "
                           f"--batch-size {config.batch_size} chunks")
    if config.init_dbn and (config.model != "dnn" or config.activation != "sigmoid"):
        raise AsrdistError("--init-dbn initialises a sigmoid DNN: set --model dnn and "
                           "--activation sigmoid")
    if config.objective.sequence:
        _check_sequence(config)
    if not (config.device == "cpu" or config.device.startswith("cuda")):
        raise AsrdistError(f"--device {config.device!r}: use cpu, cuda or cuda:N")
    for name in resume_allowed(config):
        if name != "all" and name not in all_fields():
            raise AsrdistError(f"--resume-allow: {name!r} is not an option")
    _every_strategys_options(config)  # each options dataclass checks its values when made


def _check_sequence(config: TrainConfig) -> None:
    """Options a sequence-trained run cannot take, named."""
    clash = [f"{flag(name)} {value_of(config, name)}"
             for name in ("init_dbn", "noise_scale_every", "vtlp_warp", "feature_masks",
                          "time_masks") if value_of(config, name)]
    if clash:
        raise AsrdistError(f"--objective {config.objective.objective} trains whole utterances "
                           f"from --init-model without augmentation: drop {', '.join(clash)}")


def resume_allowed(config: TrainConfig) -> set[str]:
    """The option names --resume-allow lists (``all``: any)."""
    return {n.strip().lstrip("-").replace("-", "_")
            for n in config.resume_allow.split(",") if n.strip()}


def _every_strategys_options(config: TrainConfig) -> list[Any]:
    """Every registered strategy's options made from ``config``: one config file serves every
    --algo, so a bad value is refused whichever strategy this run uses. A value only some
    strategies take (``--compress powersgd``: ssgd's) is refused for this run's alone."""
    own = getattr(registry.specs().get(config.algo), "options", None)
    made = {}
    for spec in registry.specs().values():
        if spec.options not in made:
            values = {f.name: config.option(f.name) for f in fields(spec.options)}
            made[spec.options] = spec.options(**(values if spec.options is own
                                                  else _takeable(spec.options, values)))
    return [config.process_options(), *made.values()]


def _takeable(options: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with a ``--compress powersgd`` that ``options`` does not take set back to
    none: another strategy's choice, checked against the values, not the strategy."""
    if values.get("compress") == "powersgd" and not getattr(options, "powersgd_ok", True):
        return {**values, "compress": "none"}
    return values


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
