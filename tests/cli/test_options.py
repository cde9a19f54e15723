"""asrdist-train and asrdist-simulate derive their flags from the same declarations."""

from __future__ import annotations

import dataclasses

import click
from click.testing import CliRunner

from asrdist.cli import simulate, train
from asrdist.cli.options import click_option, given_or_default
from asrdist.models.build import ModelConfig
from asrdist.options import declared, option, paths
from asrdist.parallel import registry
from asrdist.train.config import FIELDS, TrainConfig, make_config, strategy_fields
from asrdist.train.schedule import ScheduleOptions


def _help_records(command: click.Command) -> dict[str, tuple[str, str]]:
    """Each option's (flags, help) as ``--help`` prints them, by parameter name."""
    ctx = click.Context(command, info_name="x")
    return {p.name: p.get_help_record(ctx) for p in command.get_params(ctx)
            if isinstance(p, click.Option) and not p.is_eager}


def test_shared_options_have_the_same_flag_default_and_help_from_the_declaration():
    both = _help_records(train.main)
    sim = _help_records(simulate.main)
    shared = simulate.shared_fields()
    # what the two commands both have is shared, but --algo and --epochs (a float here), and
    # the paths each reads and writes (the TensorBoard directory among them)
    assert set(both) & set(sim) == {*shared, "algo", "epochs", "data", "targets", "out",
                                    "tensorboard"}
    assert {"layers", "units", "lr", "lr_schedule", "momentum", "batch_size", "chunk_len",
            "avg_period", "hadpsgd_variant", "slow_learner"} <= set(shared)
    for name, f in shared.items():
        assert sim[name] == both[name], name
        flags, text = both[name]
        assert flags.split(" ")[0].split("/")[0].rstrip(",") == "--" + name.replace("_", "-")
        assert text == f"{f.metadata['help']} [default: {f.default if f.default != '' else 'none'}]"
    # the declarations are the components': the model's, the schedule's, a strategy's
    assert shared["layers"] is declared(ModelConfig)["layers"]
    assert shared["lr"] is declared(ScheduleOptions)["lr"]
    assert shared["avg_period"] is registry.option_fields()["avg_period"]
    model_layers = next(f for f in dataclasses.fields(ModelConfig) if f.name == "layers")
    assert (model_layers.default, model_layers.metadata["help"]) == (
        shared["layers"].default, shared["layers"].metadata["help"])


def test_both_commands_run_with_the_declared_defaults():
    cfg = make_config(None, {"data": "d", "targets": "t", "out": "o"})
    sim = given_or_default(simulate.option_fields(), {})
    for name, f in simulate.shared_fields().items():
        assert cfg.option(name) == sim[name] == f.default, name


def test_help_text_lists_every_shared_flag_in_both():
    outputs = [CliRunner().invoke(cmd, ["--help"], terminal_width=200).output
               for cmd in (train.main, simulate.main)]
    for name in simulate.shared_fields():
        for out in outputs:
            assert "--" + name.replace("_", "-") in out, name


def test_a_bool_declaration_gives_both_flags_and_a_choice_its_choices():
    @dataclasses.dataclass(frozen=True)
    class Toy:
        fast: bool = option(False, "go fast")
        how: str = option("a", "which way", ("a", "b"))

    fast, how = (click_option(f.name, f) for f in dataclasses.fields(Toy))
    assert (fast.opts, fast.secondary_opts, fast.default) == (["--fast"], ["--no-fast"], None)
    assert isinstance(how.type, click.Choice) and list(how.type.choices) == ["a", "b"]
    assert how.help == "which way [default: a]"


def test_every_training_option_is_declared_once():
    """TrainConfig's options are its own declarations or a component's very field."""
    strategy = set(strategy_fields())
    assert not strategy & set(FIELDS)
    own = {f.name for f in dataclasses.fields(TrainConfig)}
    for name, (path, f) in paths(TrainConfig).items():
        if len(path) == 1:
            assert path[0] in own, name
        else:
            holder = next(g for g in dataclasses.fields(TrainConfig) if g.name == path[0])
            assert declared(holder.metadata["component"])[name] is f, name


def test_options_of_real_processes_only_are_not_simulator_flags():
    """--elastic, --exchange-timeout, --distance-every act on real exchanges: a simulated run
    would take them and do nothing."""
    real_only = {"elastic", "exchange_timeout", "distance_every"}
    assert real_only <= set(_help_records(train.main))
    assert not real_only & set(_help_records(simulate.main))
