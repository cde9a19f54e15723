"""RunSpec's defaults are asrdist-train's: it holds asrdist-train's component options objects
(the model's, the data reading's, the schedule's, the optimizer's) and declares its epochs,
clipping and seed as asrdist-train declares them; the studies state their own values
(bench/studies/common.py's STUDY_DEFAULTS, tests/bench/test_study_cache_keys.py).
asrdist-simulate's shared flags are asrdist-train's declarations (tests/cli/test_options.py)."""

from __future__ import annotations

from asrdist.options import flatten, paths
from asrdist.simulate.experiment import RunSpec
from asrdist.train.config import TrainConfig, make_config


def test_every_option_of_runspec_has_asrdist_train_s_default():
    train = make_config(None, {"data": "d", "targets": "t", "out": "o"}).to_dict()
    spec = flatten(RunSpec(algo="ssgd"))
    assert set(spec) <= set(train)
    assert {n: v for n, v in spec.items() if v != train[n]} == {}
    # what the old RunSpec held, by hand: 256 chunks, 10 epochs, no clipping, a 4x512 BLSTM
    # under the ibm schedule at 0.1, SGD with momentum 0.9
    assert (spec["batch_size"], spec["epochs"], spec["grad_clip"], spec["layers"],
            spec["units"], spec["lr_schedule"], spec["lr"], spec["momentum"]) == \
        (256, 10.0, 0.0, 4, 512, "ibm", 0.1, 0.9)


def test_runspec_holds_asrdist_train_s_components_and_declarations():
    spec_paths, train_paths = paths(RunSpec), paths(TrainConfig)
    for name, (path, f) in spec_paths.items():
        declared = train_paths[name][1]
        if len(path) > 1:  # a component's: the same declaration, not a copy of it
            assert f is declared, name
        else:  # RunSpec's own (epochs a float): asrdist-train's help and check
            assert (dict(f.metadata), f.default) == (dict(declared.metadata), declared.default)
    train = TrainConfig()
    spec = RunSpec(algo="ssgd")
    assert (spec.model, spec.reading, spec.schedule, spec.optim) == \
        (train.net, train.reading, train.schedule, train.optim)


def test_asrdist_simulate_s_defaults_are_asrdist_train_s():
    """Every option asrdist-simulate shares with asrdist-train, --epochs too (a float here),
    defaults as asrdist-train's does; its own (--learners, --evals, ...) are not train's."""
    from asrdist.cli import simulate

    train = make_config(None, {"data": "d", "targets": "t", "out": "o"}).to_dict()
    sim = {name: f.default for name, f in simulate.option_fields().items()
           if name in train and name != "algo"}  # --algo: a distributed strategy here
    assert {n: (v, train[n]) for n, v in sim.items() if v != train[n]} == {}
    assert sim["epochs"] == 10.0 and {"batch_size", "layers", "lr", "grad_clip"} <= set(sim)
