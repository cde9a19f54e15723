"""What a simulated run should say before its figures are trusted: what a step costs under the
speed model, epochs too short for a strategy's rhythm, and a held-out CE that diverged.

A comparison is only as good as its set-up: an epoch of three steps is mostly an averaging
period's warm-up, a free link makes every strategy's communication cost nothing, and a block
momentum's default diverged silently at 16 learners once (issue 34). The simulator's report
carries these lines, and asrdist-simulate logs them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.simulate.speed import BACKWARD_SHARE, SpeedModel

FEW_STEPS = 20  # steps per epoch below which an epoch is mostly a strategy's warm-up
DIVERGED = 2.0  # held-out CE this many times its lowest so far: the run diverged
# the model's copies each simulated learner holds at the least: its weights, their gradients,
# and the flat copies of where it started and where its steps ended (the run's result); its
# optimizer's momentum is one more, a strategy's own state more again
LEARNER_COPIES = 4


def step_cost(speed: SpeedModel, learners: int, nbytes: int) -> dict[str, float]:
    """Seconds of one step's compute and of the exchanges of a model of ``nbytes`` among
    ``learners``: one message across nodes (a pairwise exchange), one ring allreduce of all,
    and what of it a gradient mean exposes after a backward pass at the base speed; with nodes
    of several learners, one message and one ring allreduce within a node too."""
    everyone = range(learners)
    allreduce = speed.allreduce_s(nbytes, everyone)
    cost = {"compute_s": speed.compute_s, "update_s": speed.update_s,
            "message_s": speed.send_s(nbytes, 0, speed.node_size),
            "allreduce_s": allreduce,
            "gradient_allreduce_s": speed.exposed_s(allreduce, BACKWARD_SHARE * speed.compute_s)}
    if speed.node_size > 1:
        cost["node_message_s"] = speed.send_s(nbytes, 0, 1)
        cost["node_allreduce_s"] = speed.allreduce_s(nbytes, everyone[:speed.node_size])
    return cost


def free_link(speed: SpeedModel) -> bool:
    """Whether every message costs nothing: then no strategy pays for communicating."""
    free = speed.latency_s == 0 and math.isinf(speed.bandwidth)
    return free and (speed.node_size == 1 or speed.node_latency_s == 0
                     and math.isinf(speed.node_bandwidth))


def cost_line(speed: SpeedModel, learners: int, nbytes: int) -> str:
    """The start-up line: what a step computes and what the model's exchanges cost."""
    cost = step_cost(speed, learners, nbytes)
    compute = cost["compute_s"] + cost["update_s"]
    line = (f"speed model: a step computes {cost['compute_s']:g} s + {cost['update_s']:g} s "
            "update")
    if speed.jitter > 0:
        line += f" (jitter {speed.jitter:g})"
    if speed.slow:
        slow = sorted(speed.slow.items())
        line += "; " + ", ".join(f"learner {r} {f:g}x slower" for r, f in slow)
    if free_link(speed):
        return (line + f"; communication is free (--latency 0, --bandwidth inf): the model's "
                f"{nbytes / 1e6:.3g} MB cost nothing to exchange; set them to model a link")
    ratio = f" ({cost['allreduce_s'] / compute:.3g}x its compute)" if compute > 0 else ""
    line += (f"; the model's {nbytes / 1e6:.3g} MB: {cost['message_s']:.4g} s a message, "
             f"{cost['allreduce_s']:.4g} s a ring allreduce of {learners}{ratio}")
    if speed.overlap > 0:
        line += (f", {cost['gradient_allreduce_s']:.4g} s of it after backward in a gradient "
                 f"mean (overlap {speed.overlap:g})")
    if speed.node_size > 1:
        line += (f"; nodes of {speed.node_size}: {cost['node_message_s']:.4g} s a message, "
                 f"{cost['node_allreduce_s']:.4g} s a node's allreduce")
    return line


def few_steps(per_epoch: int, learners: int, batch: int) -> str | None:
    """A warning when an epoch is fewer than :data:`FEW_STEPS` steps."""
    if per_epoch >= FEW_STEPS:
        return None
    return (f"an epoch is only {per_epoch} steps of {learners} learners x {batch} chunks: "
            "averaging periods, warm-up and outer steps span much of it; use more data, a "
            "smaller --batch-size or fewer --learners")


def diverged(records: Sequence[dict[str, Any]]) -> str | None:
    """A warning when a held-out CE is not finite or above :data:`DIVERGED` times the lowest
    before it (the start's, with a step-0 record, or a later one): a run that learned and then
    blew up is caught even where it stays below twice its start."""
    for k, r in enumerate(records[1:], 1):
        best = min(records[:k], key=lambda b: b["heldout_ce"])
        ce = r["heldout_ce"]
        if not math.isfinite(ce) or ce > DIVERGED * best["heldout_ce"]:
            return (f"held-out CE diverged: {ce:.4g} at step {r['steps']:.0f}, more than "
                    f"{DIVERGED:g}x its lowest before, {best['heldout_ce']:.4g} at step "
                    f"{best['steps']:.0f}; lower --lr or the strategy's outer rate or momentum")
    return None


def memory_needed(nbytes: int, learners: int, momentum: bool) -> int:
    """Bytes the learners hold at the least, for a model of ``nbytes``: what a run of many
    learners of a large model would allocate before it failed."""
    return nbytes * learners * (LEARNER_COPIES + momentum)


def available_memory() -> int | None:
    """Bytes this host can still allocate (MemAvailable; free pages where /proc has none);
    None where neither says."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_memory(weights: int, nbytes: int, learners: int, momentum: bool) -> None:
    """Refuse, before any learner is made, a run whose learners cannot fit in this host's
    available memory, giving the estimate."""
    needed, free = memory_needed(nbytes, learners, momentum), available_memory()
    if free is None or needed <= free:
        return
    copies = LEARNER_COPIES + momentum
    raise AsrdistError(f"--learners {learners}: the learners need at least {needed / 1e9:,.1f} "
                       f"GB ({weights} weights, {nbytes / 1e6:.3g} MB, x {copies} copies per "
                       f"learner x {learners}) and this host has {free / 1e9:,.1f} GB "
                       "available: use fewer --learners or a smaller model")
