"""diloco-async: the host's delayed Nesterov step by hand, and the strategy against plain
reference loops, in one process, in real learner processes and in the simulator.

The expected values come from the definition (asrdist.parallel.strategies.async_diloco's docstring),
by hand for the outer state and by plain torch loops for the learners.
"""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.rules.async_outer import AsyncOuter
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategies.outer import OuterNesterov
from asrdist.parallel.strategy import train_step
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, run_learners, running_stores, stores_end


def t(x: float) -> torch.Tensor:
    return torch.tensor([x], dtype=torch.float64)


# -- the host's state, by hand: one weight, a scripted order of pushes ---------------------------


@pytest.mark.parametrize("activation,after", [
    # lr 0.5, mu 0.5, N = 2; w_g starts at 10; pushes g = 2 (learner 0), 4 (1), 6 (0).
    # c = 0: t=1: w -= 0.5*(2/2) -> 9.5;  t=2: b = 0.5*0 + (2+4)/2 = 3,
    #        w -= 0.5*((1 - 0 + 0)*0.5*3 + 4/2) = 1.75 -> 7.75;  t=3: w -= 0.5*(0 + 6/2) -> 6.25
    (0.0, [9.5, 7.75, 6.25]),
    # c = 0.25: t=1: w -= 0.5*(0.25*0.5*0 + 1) -> 9.5;  t=2: b = 3,
    #        w -= 0.5*((1 - 0.5 + 0.25)*0.5*3 + 2) = 1.5625 -> 7.9375;
    #        t=3: w -= 0.5*(0.25*0.5*3 + 3) = 1.6875 -> 6.25 (over N pushes: the same momentum)
    (0.25, [9.5, 7.9375, 6.25]),
])
def test_delayed_nesterov_on_a_scripted_order_of_pushes(activation, after):
    state = AsyncOuter(t(10.0), learners=2, period=4, lr=0.5, momentum=0.5, buffer=2,
                       activation=activation)
    got = [state.push(rank, t(g), 4, 1.0) for rank, g in [(0, 2.0), (1, 4.0), (0, 6.0)]]
    for (weights, steps, _), want in zip(got, after, strict=True):
        torch.testing.assert_close(weights, t(want), rtol=0, atol=1e-12)
        assert steps == 4
    # staleness: pushes applied since the pusher's pull (learner 1 pulled at the start)
    assert [stale for _, _, stale in got] == [0, 1, 1]
    torch.testing.assert_close(state.weights, t(after[-1]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("quorum", [0, 1])
def test_with_a_buffer_or_a_quorum_of_one_it_is_diloco_s_outer_nesterov_step(quorum):
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(6, generator=gen, dtype=torch.float64)
    state = AsyncOuter(start, learners=1, period=3, lr=0.7, momentum=0.9, quorum=quorum)
    rule, w_g = OuterNesterov(0.7, 0.9), start.clone()
    for _ in range(4):
        local = w_g + 0.1 * torch.randn(6, generator=gen, dtype=torch.float64)
        w_g = rule.block(w_g, local)
        pulled, _, _ = state.push(0, state.weights - local, 3, 1.0)
        torch.testing.assert_close(pulled, w_g, rtol=1e-12, atol=1e-12)


def test_speed_following_steps_by_hand():
    """H = 6: learner 0 takes 1 s a step, learner 1 3 s: learner 1's next block is 2 steps,
    learner 0's 6; without the option every block is 6."""
    for follow, want in ((True, (6, 2)), (False, (6, 6))):
        state = AsyncOuter(t(0.0), learners=2, period=6, follow_speed=follow)
        assert state.push(0, t(0.0), 6, 6.0)[1] == want[0]
        assert state.push(1, t(0.0), 6, 18.0)[1] == want[1]


def test_an_activation_above_one_over_n_is_one_line_naming_the_option():
    with pytest.raises(AsrdistError, match="--async-activation 0.5: must be in"):
        AsyncOuter(t(0.0), learners=4, period=2, activation=0.5)


# -- one learner: SGD with the outer step every H steps -----------------------------------------


def _reference(steps: int, h: int, lr_out: float = 0.7, mu: float = 0.9) -> torch.Tensor:
    """Plain SGD (lr 0.1, momentum 0.9); every h steps diloco's outer Nesterov step."""
    model = make_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start, b = flat_weights(model), torch.zeros(())
    for step in range(steps):
        x, y = batch(step, 0, 8, False)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if (step + 1) % h == 0:
            g = start - flat_weights(model)
            b = mu * b + g
            start = start - lr_out * (g + mu * b)
            torch.nn.utils.vector_to_parameters(start.clone(), model.parameters())
    return flat_weights(model)


def test_one_learner_is_sgd_with_the_outer_step_every_h_steps():
    strategy = make_strategy("diloco-async", avg_period=3)
    model = make_model(0)
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
    for step in range(8):
        x, y = batch(step, 0, 8, False)
        train_step(strategy, wrapped, opt, step,
                   lambda m, x=x, y=y: torch.nn.functional.mse_loss(m(x), y))
    strategy.finalize(wrapped)
    strategy.close()
    torch.testing.assert_close(flat_weights(model), _reference(8, 3), rtol=1e-6, atol=1e-7)
    assert strategy.metrics()["pushes"] == 2


def test_one_learner_resumes_inside_a_block_exactly(tmp_path):
    """A checkpoint after step 4 of blocks of 3 (one step into the second block)."""
    sc = {"algo": "diloco-async", "lr": 0.1, "momentum": 0.9, "steps": 8,
          "options": {"avg_period": 3}}
    straight = ok(run_learners(sc, 1, tmp_path / "a"))[0]
    ok(run_learners({**sc, "checkpoint_at": 4}, 1, tmp_path / "b"))
    resumed = ok(run_learners({**sc, "resume": True}, 1, tmp_path / "b"))[0]
    torch.testing.assert_close(straight["final"], _reference(8, 3), rtol=1e-6, atol=1e-7)
    assert torch.equal(resumed["final"], straight["final"])


# -- several learners -------------------------------------------------------------------------


def _two_learners_reference(steps: int, h: int, order: list[int], lr_out: float = 0.7,
                            mu: float = 0.9, quorum: int = 0) -> list[torch.Tensor]:
    """Two learners (SGD lr 0.1, momentum 0.5, on their shards) from the mean of
    make_model(0) and make_model(1), pushing blocks of h steps to a delayed Nesterov host
    (N = 2, c = 0), or one merging every ``quorum`` pushes, in the order ``order`` (a
    learner's rank per push)."""
    models = [make_model(r) for r in range(2)]
    w_g = torch.stack([flat_weights(m) for m in models]).mean(0)
    for m in models:
        torch.nn.utils.vector_to_parameters(w_g.clone(), m.parameters())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5) for m in models]
    pulled, taken = [w_g.clone(), w_g.clone()], [0, 0]
    b, d, held = torch.zeros_like(w_g), torch.zeros_like(w_g), []
    for t_, r in enumerate(order, start=1):
        for _ in range(h):  # learner r's block
            x, y = batch(taken[r], r, 8, False)
            opts[r].zero_grad()
            torch.nn.functional.mse_loss(models[r](x), y).backward()
            opts[r].step()
            taken[r] += 1
        g = pulled[r] - flat_weights(models[r])
        d = d + g
        if quorum:  # equal blocks: the plain mean of the held pushes
            held.append(g)
            if len(held) == quorum:
                merged = torch.stack(held).mean(0)
                b, held = mu * b + merged, []
                w_g = w_g - lr_out * (merged + mu * b)
        elif t_ % 2 == 0:
            b, d = mu * b + d / 2, torch.zeros_like(d)
            w_g = w_g - lr_out * (mu * b + g / 2)
        else:
            w_g = w_g - lr_out * g / 2
        pulled[r] = w_g.clone()
        torch.nn.utils.vector_to_parameters(w_g.clone(), models[r].parameters())
    assert taken == [steps, steps]
    return [flat_weights(m) for m in models]


@pytest.mark.parametrize("quorum", [0, 2])
def test_processes_follow_the_reference_in_a_fixed_order_of_pushes(tmp_path, quorum):
    """Learner 1 starts 1.5 s late: learner 0's two blocks reach the host first, then learner
    1's, the first of them two pushes stale (taken from the start weights)."""
    res = ok(run_learners({"algo": "diloco-async", "lr": 0.1, "momentum": 0.5, "steps": 4,
                           "init": "rank", "late_rank": 1, "late_s": 1.5,
                           "options": {"avg_period": 2, "async_quorum": quorum}},
                          2, tmp_path))
    refs = _two_learners_reference(4, 2, [0, 0, 1, 1], quorum=quorum)
    for r in range(2):
        torch.testing.assert_close(res[r]["before"], refs[r], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res[r]["final"], torch.stack(refs).mean(0), rtol=1e-5,
                                   atol=1e-6)
    assert res[1]["state"]["pushes"] == 2 and "outer" in res[0]["state"]
    assert res[1]["metrics"].get("async_buffer") == (None if quorum else 2)  # N resolved
    # learner 1 sent its share of the start's average (a ring of 2: the weights once) and its
    # two pseudo-gradients (float32)
    nbytes = 4 * refs[0].numel()
    assert res[1]["metrics"]["sent_bytes"] == nbytes + 2 * nbytes


def test_elastic_processes_follow_the_reference_in_a_fixed_order_of_pushes(tmp_path):
    """The order of the test above, the outer state in the store process: the same w_g as
    the plain reference loop (so as learner 0's host). What the learners sent: each its share
    of the start's average, two float32 pushes, and one of them the start (w_g, the options:
    torch.save's few hundred bytes around the weights)."""
    res = ok(run_learners({"algo": "diloco-async", "lr": 0.1, "momentum": 0.5, "steps": 4,
                           "init": "rank", "late_rank": 1, "late_s": 1.5,
                           "options": {"avg_period": 2, "elastic": True}}, 2, tmp_path))
    refs = _two_learners_reference(4, 2, [0, 0, 1, 1])
    for r in range(2):
        torch.testing.assert_close(res[r]["before"], refs[r], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res[r]["final"], torch.stack(refs).mean(0), rtol=1e-5,
                                   atol=1e-6)
        assert res[r]["state"]["pushes"] == 2 and "outer" not in res[r]["state"]
    nbytes = 4 * refs[0].numel()
    start = sum(res[r]["metrics"]["sent_bytes"] for r in range(2)) - 2 * (nbytes + 2 * nbytes)
    assert nbytes < start < nbytes + 4096


def test_elastic_compressed_pushes_give_the_host_s_w_g(tmp_path):
    """--compress int8 in the same fixed order: the store process decodes each push and
    applies it as learner 0's host does, so both runs end with the same weights, bit for bit
    (the codec and the maths run the same operations on the same bytes)."""
    sc = {"algo": "diloco-async", "lr": 0.1, "momentum": 0.5, "steps": 4, "init": "rank",
          "late_rank": 1, "late_s": 1.5, "options": {"avg_period": 2, "compress": "int8"}}
    host = ok(run_learners(sc, 2, tmp_path / "host"))
    store = ok(run_learners({**sc, "options": {**sc["options"], "elastic": True}}, 2,
                            tmp_path / "store"))
    for r in range(2):
        assert torch.equal(store[r]["before"], host[r]["before"])
        assert torch.equal(store[r]["final"], host[r]["final"])


def _elastic_one(tmp_path, name: str, **more) -> dict:
    """One learner of an elastic run (its store process, the outer state in it): 8 steps,
    blocks of 3, the run dir ``tmp_path / name``."""
    out = tmp_path / name
    return {"algo": "diloco-async", "lr": 0.1, "momentum": 0.9, "steps": 8,
            "init_world_1": True,
            "options": {"avg_period": 3, "elastic": True, "out": str(out)}, **more}


def test_elastic_one_learner_resumes_inside_a_block_exactly(tmp_path):
    """A checkpoint after step 4 (the store process saves w_g and the momentum then), the
    run resumed in a new store process: the same weights as a run straight through."""
    straight = ok(run_learners(_elastic_one(tmp_path, "a"), 1, tmp_path / "a"))[0]
    ok(run_learners(_elastic_one(tmp_path, "b", checkpoint_at=4), 1, tmp_path / "b"))
    assert (tmp_path / "b" / "outer_state.pt").is_file()
    resumed = ok(run_learners(_elastic_one(tmp_path, "b", resume=True), 1, tmp_path / "b"))[0]
    torch.testing.assert_close(straight["final"], _reference(8, 3), rtol=1e-6, atol=1e-7)
    assert torch.equal(resumed["final"], straight["final"])


def test_elastic_resume_without_the_run_s_outer_state_is_one_line(tmp_path):
    """No outer_state.pt, or another run's (its token differs): the learner ends saying so."""
    ok(run_learners(_elastic_one(tmp_path, "b", checkpoint_at=4), 1, tmp_path / "b"))
    state = tmp_path / "b" / "outer_state.pt"
    another = torch.load(state)
    another["token"] = "another run's"
    state.unlink()
    for saved, want in ((None, "no diloco-async outer state to resume from"),
                        (another, "the outer state of another run")):
        if saved is not None:
            torch.save(saved, state)
        run = run_learners(_elastic_one(tmp_path, "b", resume=True), 1, tmp_path / "b")
        assert run.codes == [1], want
        lines = [x for x in run.stderr[0].splitlines() if "AsrdistError" in x]
        assert lines and want in lines[-1], (want, run.stderr[0][-2000:])


def test_simulated_staleness_counts_the_others_pushes_since_the_pull():
    """Learner 1 100x slower, blocks of 2, 4 steps: learner 0 pushes twice (nothing between
    its pull and push), then learner 1 pushes on the start weights after those two, then once
    more on what it pulled (nothing between)."""
    sim = simulate("diloco-async", 2, 4, make_model,
                   lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                   lambda i, k, m: torch.nn.functional.mse_loss(m(batch(k, i, 8, False)[0]),
                                                                batch(k, i, 8, False)[1]),
                   options={"avg_period": 2}, speed=SpeedModel(slow={1: 100.0}))
    assert sim.summary["staleness"] == {0: 3, 2: 1}


def test_simulated_speed_following_gives_a_3x_slower_learner_blocks_of_a_third():
    """H = 6, 12 steps, learner 2 three times slower: learners 0 and 1 push twice, learner 2
    once after 6 steps, then every 2 steps (3 more); only learners 1 and 2 send (the host's
    own pushes cost nothing), each push the pseudo-gradient there and the weights back."""
    nbytes = 4 * flat_weights(make_model(0)).numel()
    runs = {follow: simulate("diloco-async", 3, 12, make_model,
                             lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                             lambda i, k, m: torch.nn.functional.mse_loss(
                                 m(batch(k, i, 8, False)[0]), batch(k, i, 8, False)[1]),
                             options={"avg_period": 6, "async_follow_speed": follow},
                             speed=SpeedModel(slow={2: 3.0}, latency_s=0.01))
            for follow in (False, True)}
    # the start's average and the final one (a ring of 3: each learner sends 2*(3-1)/3 of
    # the weights) and the end's 4-byte vote
    ends = 2 * 3 * (2 * 2 / 3 * nbytes) + 3 * (2 * 2 / 3 * 4)
    for follow, pushes in ((False, 2 + 2), (True, 2 + 4)):
        cross = runs[follow].summary["wire_bytes"]["cross"]
        assert cross == pytest.approx(ends + pushes * 2 * nbytes)


@pytest.mark.parametrize("killed", [2, 0])
def test_elastic_a_killed_learner_is_dropped_and_the_others_finish(tmp_path, killed):
    """A learner of 3 is SIGKILLed at step 30, learner 0 too: the outer state lives in the
    store process, so the others push on without it (no barrier), and the survivors export
    their own average; the store process ends with the run."""
    steps = 160
    sc = {"algo": "diloco-async", "lr": 0.05, "steps": steps, "compute_s": 0.01,
          "timeout_s": 5.0, "kill_at": 30, "kill_rank": killed, "record_average": True,
          "options": {"elastic": True, "avg_period": 4}}
    stores = running_stores()
    run = run_learners(sc, 3, tmp_path, timeout=90)
    stores_end(stores)
    survivors = [r for r in range(3) if r != killed]
    assert run.codes[killed] == -9
    for r in survivors:
        assert run.codes[r] == 0, f"learner {r} exited {run.codes[r]}:\n{run.stderr[r][-3000:]}"
        assert run.results[r]["steps"] == steps
        assert run.results[r]["state"]["pushes"] == steps // 4
        assert "staleness" in run.results[r]["metrics"]  # the learners' records have it
    assert f"learner {killed} left at step" in "".join(run.stderr)
    put_in = [run.results[r]["averaged"][0] for r in survivors]
    for r in survivors:
        torch.testing.assert_close(run.results[r]["final"], (put_in[0] + put_in[1]) / 2,
                                   rtol=0, atol=1e-6)


def test_a_quorum_merges_the_held_pushes_weighted_by_their_steps():
    """Q = 2, lr 0.5, mu 0.5, w_g = 10: learner 0 pushes g = 2 after 4 steps (held: it pulls
    10), learner 1 g = 5 after 1 step: G = (4*2 + 1*5) / 5 = 2.6, b = 2.6,
    w_g = 10 - 0.5*(2.6 + 0.5*2.6) = 8.05; the third push is held again."""
    state = AsyncOuter(t(10.0), learners=2, period=4, lr=0.5, momentum=0.5, quorum=2)
    got = [state.push(r, t(g), steps, 1.0)[0] for r, g, steps in [(0, 2.0, 4), (1, 5.0, 1),
                                                                    (0, 1.0, 4)]]
    for weights, want in zip(got, [10.0, 8.05, 8.05], strict=True):
        torch.testing.assert_close(weights, t(want), rtol=0, atol=1e-12)
    with pytest.raises(AsrdistError, match="--async-quorum: it replaces delayed Nesterov"):
        AsyncOuter(t(0.0), learners=2, period=4, quorum=2, buffer=2)


def test_simulated_compressed_pushes_send_the_codec_s_bytes():
    """--compress int8: learner 1's two pushes send a byte a value and a float32 scale per
    block of 256 values, the replies float32 weights; the start's and the end's averages
    (2 (2-1) of the weights each) and the end's 4-byte vote stay float32."""
    numel = flat_weights(make_model(0)).numel()
    sim = simulate("diloco-async", 2, 4, make_model,
                   lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                   lambda i, k, m: torch.nn.functional.mse_loss(m(batch(k, i, 8, False)[0]),
                                                                batch(k, i, 8, False)[1]),
                   options={"avg_period": 2, "compress": "int8"},
                   speed=SpeedModel(latency_s=0.01))
    payload = numel + 4 * -(-numel // 256)
    assert sim.summary["wire_bytes"]["cross"] == 2 * (2 * 4 * numel) + 2 * 4 \
        + 2 * (payload + 4 * numel)
