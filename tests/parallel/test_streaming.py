"""streaming-diloco (asrdist.parallel.strategies.streaming): diloco a fragment at a time, staggered,
its outer steps tau steps late and mixed in by alpha.

The expected values come from a plain reference loop written here from the definition (and
from diloco itself where it must be diloco bit for bit), never from the module's code.
"""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.rules.compress import CompressedMean, compressed_mean, make_codec
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategies.streaming import split_fragments
from asrdist.parallel.strategy import train_step
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, resumes_exactly, run_learners

# make_model's parameters: Linear(4, 5) weight 20, bias 5; Linear(5, 3) weight 15, bias 3
SIZES = [20, 5, 15, 3]


def test_fragments_are_contiguous_and_about_equal_by_hand():
    # 43 elements: half is 21.5, reached by the second tensor (25); thirds 14.3 and 28.7,
    # reached by the first (20) and the third (40)
    assert split_fragments(SIZES, 1) == [range(0, 4)]
    assert split_fragments(SIZES, 2) == [range(0, 2), range(2, 4)]
    assert split_fragments(SIZES, 3) == [range(0, 1), range(1, 3), range(3, 4)]
    # one big tensor first: every later fragment still gets one tensor
    assert split_fragments([100, 1, 1, 1], 3) == [range(0, 1), range(1, 2), range(2, 4)]
    with pytest.raises(AsrdistError, match="--stream-fragments 5: the model has 4"):
        split_fragments(SIZES, 5)


def test_options_are_checked():
    with pytest.raises(AsrdistError, match="--stream-delay 4: must be below the averaging"):
        make_strategy("streaming-diloco", avg_period=4, stream_delay=4)
    with pytest.raises(AsrdistError, match="--stream-alpha must be in"):
        make_strategy("streaming-diloco", stream_alpha=1.0)
    with pytest.raises(AsrdistError, match="--stream-fragments must be positive"):
        make_strategy("streaming-diloco", stream_fragments=0)
    # the default delay: one step, none where every step ends a block
    assert make_strategy("streaming-diloco").delay == 1
    assert make_strategy("streaming-diloco", avg_period=1).delay == 0


def test_a_checkpoint_of_another_fragment_count_is_refused():
    saved = make_strategy("streaming-diloco", stream_fragments=2)
    saved.wrap_model(make_model(0))
    state = saved.state_dict()
    other = make_strategy("streaming-diloco", stream_fragments=3)
    other.wrap_model(make_model(0))
    with pytest.raises(AsrdistError, match="--stream-fragments 3: the checkpoint has 2"):
        other.load_state_dict(state)
    late = make_strategy("streaming-diloco", stream_fragments=3)
    late.load_state_dict(state)  # before wrap_model: checked there
    with pytest.raises(AsrdistError, match="--stream-fragments 3: the checkpoint has 2"):
        late.wrap_model(make_model(0))


def streaming_reference(steps: int, k: int, n: int, groups: list[list[int]], tau: int,
                        alpha: float, lr_out: float = 0.7, mu: float = 0.9,
                        compress: str = "none") -> tuple[list[torch.Tensor], torch.Tensor]:
    """``n`` learners of local SGD (lr 0.1, momentum 0.5) from make_model(0); fragment p (the
    parameters ``groups[p]``) ends a block after step s when s + 1 >= k and
    (s + 1 - p*k//P) % k == 0: the learners' mean of it then is taken by a Nesterov outer
    step ``tau`` steps later, and every learner's fragment becomes alpha * its own +
    (1 - alpha) * the new start. ``compress``: the mean taken at the block's end is the start
    plus the compressed mean of the updates (asrdist.parallel.rules.compress.compressed_mean, with
    each learner's error feedback for the fragment). Returns each learner's weights after the
    last step and the exported average (outer steps still due are taken first)."""
    models = [make_model(0) for _ in range(n)]
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5) for m in models]

    def frag(m: torch.nn.Module, p: int) -> list[torch.nn.Parameter]:
        params = list(m.parameters())
        return [params[i] for i in groups[p]]

    def flat(m: torch.nn.Module, p: int) -> torch.Tensor:
        return torch.nn.utils.parameters_to_vector(frag(m, p)).detach().clone()

    starts = [flat(models[0], p) for p in range(len(groups))]
    moms = [torch.zeros_like(s) for s in starts]
    due: dict[int, tuple[int, torch.Tensor]] = {}  # fragment -> (step, mean)
    sides = [[CompressedMean(make_codec(compress), n, r) for r in range(n)] for _ in groups]

    def mean(p: int) -> torch.Tensor:
        if compress == "none":
            return torch.stack([flat(m, p) for m in models]).mean(0)
        return starts[p] + compressed_mean([flat(m, p) - starts[p] for m in models], sides[p])

    def apply(p: int) -> None:
        _, mean = due.pop(p)
        g = starts[p] - mean
        moms[p] = mu * moms[p] + g
        starts[p] = starts[p] - lr_out * (g + mu * moms[p])
        for m in models:
            torch.nn.utils.vector_to_parameters(alpha * flat(m, p) + (1 - alpha) * starts[p],
                                                frag(m, p))

    for s in range(steps):
        for r in range(n):
            x, y = batch(s, r, 8, False)
            opts[r].zero_grad()
            torch.nn.functional.mse_loss(models[r](x), y).backward()
            opts[r].step()
        for p in range(len(groups)):
            phase = p * k // len(groups)
            if s + 1 >= k and (s + 1 - phase) % k == 0:
                due[p] = (s + tau, mean(p))
            if p in due and due[p][0] == s:
                apply(p)
    before = [flat_weights(m) for m in models]
    for p in sorted(due):
        apply(p)
    return before, torch.stack([flat_weights(m) for m in models]).mean(0)


def _run_in_process(algo: str, steps: int, **options) -> list[torch.Tensor]:
    """One learner, no process group: the weights after every step."""
    strategy = make_strategy(algo, **options)
    model = make_model(0)
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.5)
    history = []
    for step in range(steps):
        x, y = batch(step, 0, 8, False)
        train_step(strategy, wrapped, opt, step,
                   lambda m, x=x, y=y: torch.nn.functional.mse_loss(m(x), y))
        history.append(flat_weights(model))
    strategy.finalize(wrapped)
    return [*history, flat_weights(model)]


DILOCO_LIKE = {"stream_fragments": 1, "stream_delay": 0, "stream_alpha": 0.0}


def test_one_learner_one_fragment_no_delay_is_diloco_bit_for_bit():
    diloco = _run_in_process("diloco", 8, avg_period=3)
    streaming = _run_in_process("streaming-diloco", 8, avg_period=3, **DILOCO_LIKE)
    assert all(torch.equal(a, b) for a, b in zip(diloco, streaming, strict=True))
    # and it is not plain SGD: the outer steps ran (the K = 1 control)
    assert not torch.equal(diloco[-1], _run_in_process("single", 8)[-1])


@pytest.mark.parametrize("compress", ["none", "int8"])
def test_two_learners_one_fragment_no_delay_is_diloco_bit_for_bit(tmp_path, compress):
    """Also with --compress: the same compressed mean of the same updates from w_g."""
    sc = {"lr": 0.1, "momentum": 0.5, "steps": 7, "history": True}
    options = {"avg_period": 3, "compress": compress}
    diloco = ok(run_learners({**sc, "algo": "diloco", "options": options}, 2,
                             tmp_path / "diloco"))
    streaming = ok(run_learners({**sc, "algo": "streaming-diloco",
                                 "options": {**options, **DILOCO_LIKE}}, 2,
                                tmp_path / "streaming"))
    for a, b in zip(diloco, streaming, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a["history"], b["history"], strict=True))
        assert torch.equal(a["final"], b["final"])
        # the same averages cross the wire, the started ones counted too
        assert a["metrics"]["sent_bytes"] == b["metrics"]["sent_bytes"] > 0


def test_one_learner_follows_the_reference_loop():
    """Three fragments (phases 0, 1, 2 of k = 4), tau = 2, alpha = 0.25, 11 steps: blocks
    end after steps 4, 8 (fragment 0), 5, 9 (1) and 6, 10 (2); the last two are still due
    at the end and taken before the export."""
    got = _run_in_process("streaming-diloco", 11, avg_period=4, stream_fragments=3,
                          stream_delay=2, stream_alpha=0.25)
    before, final = streaming_reference(11, 4, 1, [[0], [1, 2], [3]], tau=2, alpha=0.25)
    torch.testing.assert_close(got[-2], before[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[-1], final, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options,groups,tau,alpha", [
    ({"stream_fragments": 2, "stream_delay": 1, "stream_alpha": 0.5}, [[0, 1], [2, 3]], 1,
     0.5),
    ({"stream_fragments": 2, "stream_delay": 0, "stream_alpha": 0.0, "diloco_lr": 0.5},
     [[0, 1], [2, 3]], 0, 0.0),
])
def test_two_learners_follow_the_reference_loop(tmp_path, options, groups, tau, alpha):
    """k = 4, 10 steps: fragment 0's blocks end after steps 4 and 8, fragment 1's (phase 2)
    after 6 and 10; with tau = 1 the last is applied at the end, before the export."""
    res = ok(run_learners({"algo": "streaming-diloco", "lr": 0.1, "momentum": 0.5,
                           "steps": 10, "options": {"avg_period": 4, **options}}, 2, tmp_path))
    before, final = streaming_reference(10, 4, 2, groups, tau, alpha,
                                        lr_out=options.get("diloco_lr", 0.7))
    for r in range(2):
        torch.testing.assert_close(res[r]["before"], before[r], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res[r]["final"], final, rtol=1e-5, atol=1e-6)
    assert res[0]["metrics"]["averages"] == 3 + (tau == 0)  # outer steps taken by step 10
    assert res[0]["metrics"]["fragments"] == 2


@pytest.mark.parametrize("compress", ["none", "1bit"])
def test_resume_with_an_average_in_flight_is_the_uninterrupted_run(tmp_path, compress):
    """The checkpoint after step 4 (fragment 0's block ended there, tau = 1): the average in
    flight is waited for at the checkpoint and its outer step taken at step 5 in both runs
    (1bit: the fragments' error feedback residuals resume too)."""
    sc = {"algo": "streaming-diloco", "lr": 0.1, "momentum": 0.5, "steps": 10,
          "options": {"avg_period": 4, "stream_delay": 1, "compress": compress}}
    saved = resumes_exactly(sc, 4, tmp_path)
    first, second = saved["fragments"]
    assert first["pending"]["due"] == 4 and first["b"] is None  # its outer step not yet taken
    assert second["pending"] is None
    if compress != "none":  # fragment 0 sent its update once: what 1bit lost is kept
        means = saved["compress"]["means"]  # the strategy's one --compress entry
        assert means["fragment0"]["sent"]["residual"].abs().sum() > 0
        assert means["fragment1"]["sent"]["residual"] is None
        assert "reference" not in saved["compress"]  # each fragment's w_g is its own


def test_the_delay_hides_the_average_behind_the_steps_in_the_simulator():
    """Two learners, 1 s steps, 200 bytes/s: fragment 0 (25 floats) averages in 0.5 s,
    fragment 1 (18) in 0.36 s, the whole model (43) in 0.86 s. k = 4, 8 steps: the wrap's
    average, then blocks end after steps 4, 8 (fragment 0) and 6 (fragment 1). tau = 0 waits
    for each; tau = 1 waits for none during the steps (1 s of compute hides each), only
    for the one started at step 8, at the end. The weights differ, the bytes do not."""
    def run(tau: int):
        return simulate("streaming-diloco", 2, 8, lambda i: make_model(0),
                        lambda m: torch.optim.SGD(m.parameters(), lr=0.1), _mse,
                        speed=SpeedModel(compute_s=1.0, bandwidth=200.0),
                        options={"avg_period": 4, "stream_delay": tau})

    now, late = run(0), run(1)
    assert now.summary["wait_s"] == pytest.approx([0.86 + 0.5 + 0.36 + 0.5] * 2)
    assert late.summary["wait_s"] == pytest.approx([0.86] * 2)
    # the end: the outer step due (tau = 1), the final average and the 4-byte stop vote
    assert now.summary["time_s"] == pytest.approx(0.86 + 8 + 1.36 + 0.86 + 0.02)
    assert late.summary["time_s"] == pytest.approx(0.86 + 8 + 0.5 + 0.86 + 0.02)
    wire = 2 * 4 * (43 + 25 + 18 + 25 + 43) + 2 * 4  # each learner sends each tensor once
    assert now.summary["wire_bytes"] == late.summary["wire_bytes"] == {"node": 0.0,
                                                                       "cross": wire}
    assert not torch.equal(now.final, late.final)


def _mse(i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
    x, y = batch(k, i, 8, False)
    return torch.nn.functional.mse_loss(model(x), y)
