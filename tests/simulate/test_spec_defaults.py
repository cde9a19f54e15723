"""asrdist-simulate's defaults are asrdist-train's by construction (its shared flags are
asrdist-train's declarations: tests/cli/test_options.py); ``RunSpec``, which the studies build
directly, keeps defaults of its own. Equal ones would change what every study that leaves one
unset runs (and its cached results' keys), and bench/'s call sites are positional, so they
stay; this test lists the differences, so that one more, or one fewer, is seen."""

from __future__ import annotations

from asrdist.models.build import ModelConfig
from asrdist.simulate.experiment import RunSpec
from asrdist.train.config import make_config
from asrdist.train.schedule import ScheduleOptions

# RunSpec's field: asrdist-train's option(s) it stands for
SAME_AS = {"batch": "batch_size", "epochs": "epochs", "lr": "lr", "momentum": "momentum",
           "grad_clip": "grad_clip", "seed": "seed", "nesterov": "nesterov",
           "weight_decay": "weight_decay"}


def test_runspec_defaults_differ_from_asrdist_train_s_only_where_listed():
    train = make_config(None, {"data": "d", "targets": "t", "out": "o"})
    spec = RunSpec(algo="ssgd")
    differ = {name: (getattr(spec, name), train.option(option))
              for name, option in SAME_AS.items()
              if getattr(spec, name) != train.option(option)}
    if spec.model != train.model_config():
        differ["model"] = ({k: v for k, v in spec.model.to_dict().items()
                            if v != getattr(train.model_config(), k)},
                           {k: v for k, v in train.model_config().to_dict().items()
                            if v != getattr(spec.model, k)})
    if spec.schedule != train.schedule_options():
        differ["schedule"] = (spec.schedule, train.schedule_options())
    assert differ == {
        "batch": (16, 256),  # chunks per learner per step
        "epochs": (1.0, 10),
        "grad_clip": (5.0, 0.0),
        "model": ({"layers": 1, "units": 64}, {"layers": 4, "units": 512}),
        "schedule": (None, ScheduleOptions()),  # the studies' constant rate, unscaled
    }
    assert ModelConfig(layers=1, units=64) == spec.model
