"""bmuf and diloco: ma's blocks with an outer step (asrdist.parallel.strategies.outer).

The expected values are computed here from the definitions (DESIGN.md section 3), by hand for
the rules and by a plain reference loop for the real learner processes.
"""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.strategies.outer import BlockMomentum, OuterNesterov
from tests.parallel.conftest import ok, resumes_exactly, run_learners
from tests.parallel.test_strategies import blocks_reference


def t(x: float) -> torch.Tensor:
    return torch.tensor([x], dtype=torch.float64)


def close(a: torch.Tensor, b: float) -> None:
    torch.testing.assert_close(a, t(b), rtol=0, atol=1e-12)


# -- the rules, by hand: two learners, one weight -------------------------------------------------
#
# Block 1 starts at w_g = 1.0; the learners end it at 0.6 and 0.8: mean 0.7, G = 1.0 - 0.7 = 0.3,
# summed over the two learners S = 0.6.


def test_bmuf_defaults_two_blocks_nesterov():
    rule = BlockMomentum(2)  # eta = 1 - 1/2 = 0.5, zeta = 1, Nesterov
    # v1 = 0.5*0 + (1-0.5)*1*0.6 = 0.3; w1 = 1.0 - 0.3 = 0.7 (the mean: plain ma's first block);
    # the next block starts from w1 - eta*v1 = 0.7 - 0.15 = 0.55
    close(rule.block(t(1.0), t(0.7)), 0.55)
    # block 2 from 0.55; the learners end at 0.45 and 0.35: mean 0.4, G = 0.15, S = 0.3
    # v2 = 0.5*0.3 + 0.5*1*0.3 = 0.3; w2 = 0.55 - 0.3 = 0.25; start 0.25 - 0.5*0.3 = 0.1
    # (CNTK's form: w2 is taken from the look-ahead start 0.55; W2 = W1 - v2 = 0.4, start 0.25,
    # would keep the model apart from the look-ahead point)
    close(rule.block(t(0.55), t(0.4)), 0.1)
    close(rule.v, 0.3)


def test_bmuf_classic_two_blocks():
    rule = BlockMomentum(2, nesterov=False)
    close(rule.block(t(1.0), t(0.7)), 0.7)  # v1 = 0.3, w1 = 0.7, and the next block starts there
    # block 2: mean 0.55, G = 0.15, S = 0.3; v2 = 0.5*0.3 + 0.5*0.3 = 0.3; w2 = 0.7 - 0.3 = 0.4
    close(rule.block(t(0.7), t(0.55)), 0.4)


def test_bmuf_nesterov_in_cntk_s_form_is_classic_with_zeta_times_one_plus_eta():
    """CNTK's look-ahead point is the next block's base, so its Nesterov step (1 + eta) * v
    follows the classic recursion with zeta * (1 + eta): the same starts, block after block.
    By hand, eta = 0.5: Nesterov's first start is 1.0 - 1.5*0.3 = 0.55; classic with zeta 1.5:
    v1 = 0.5*1.5*0.6 = 0.45, start 1.0 - 0.45 = 0.55."""
    nesterov = BlockMomentum(2)
    classic = BlockMomentum(2, block_lr=1.5, nesterov=False)
    start = t(1.0)
    for mean in (0.7, 0.4, 0.35, 0.5):
        a, b = nesterov.block(start, t(mean)), classic.block(start, t(mean))
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
        start = a


def test_bmuf_scale_is_cntk_s_sum_over_learners():
    """eta = 0.75 (not 1 - 1/N): CNTK's increment (1-eta)*zeta*S = 0.25*0.6 = 0.15 gives
    w1 = 0.85; averaging G before the filter (1/N of CNTK's) would give 1 - 0.25*0.3 = 0.925, and
    fairseq's v = eta*v + zeta*G would give 0.7."""
    rule = BlockMomentum(2, momentum=0.75, nesterov=False)
    close(rule.block(t(1.0), t(0.7)), 0.85)
    # block 2 from 0.85, mean 0.65: G = 0.2, S = 0.4; v2 = 0.75*0.15 + 0.25*0.4 = 0.2125
    close(rule.block(t(0.85), t(0.65)), 0.85 - 0.2125)
    # eta = 0: no filter, v = zeta*S = 2G: Kaldi's averaging with learners x lr
    close(BlockMomentum(2, momentum=0.0).block(t(1.0), t(0.7)), 1.0 - 0.6)
    # zeta scales the increment: zeta = 0.5 at the defaults is half of G
    close(BlockMomentum(2, block_lr=0.5, nesterov=False).block(t(1.0), t(0.7)), 0.85)


def test_diloco_two_blocks_sign_and_nesterov():
    rule = OuterNesterov()  # lr 0.7, momentum 0.9
    # G = 0.3 is the outer gradient, subtracted: b1 = 0.3; Nesterov step G + 0.9*b1 = 0.57;
    # w_g = 1.0 - 0.7*0.57 = 0.601 (the wrong sign would give 1.399; heavy ball without
    # Nesterov, step b1 = 0.3, 0.79)
    close(rule.block(t(1.0), t(0.7)), 0.601)
    # block 2 from 0.601, mean 0.5: G = 0.101; b2 = 0.9*0.3 + 0.101 = 0.371;
    # step 0.101 + 0.9*0.371 = 0.4349; w_g = 0.601 - 0.7*0.4349 = 0.29657
    close(rule.block(t(0.601), t(0.5)), 0.29657)
    close(rule.b, 0.371)


def test_diloco_lr1_momentum0_is_the_mean_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    start, mean = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    rule = OuterNesterov(1.0, 0.0)
    for _ in range(3):
        assert torch.equal(rule.block(start, mean), mean)


def test_options_are_checked():
    with pytest.raises(AsrdistError, match="--bmuf-momentum must be in"):
        make_strategy("bmuf", bmuf_momentum=1.0)
    with pytest.raises(AsrdistError, match="--bmuf-lr must be positive"):
        make_strategy("bmuf", bmuf_lr=0.0)
    with pytest.raises(AsrdistError, match="--diloco-momentum must be in"):
        make_strategy("diloco", diloco_momentum=-0.1)
    with pytest.raises(AsrdistError, match="--diloco-lr must be positive"):
        make_strategy("diloco", diloco_lr=0.0)


# -- real learner processes -----------------------------------------------------------------------


def _bmuf_reference(n: int, eta: float, zeta: float, nesterov: bool):
    v = [0.0]

    def outer(start: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        summed = n * (start - mean)  # sum_i (w_g - w_i)
        v[0] = eta * v[0] + (1 - eta) * zeta * summed
        w = start - v[0]
        return w - eta * v[0] if nesterov else w
    return outer


def _diloco_reference(lr: float, mu: float):
    b = [0.0]

    def outer(start: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        g = start - mean
        b[0] = mu * b[0] + g
        return start - lr * (g + mu * b[0])
    return outer


@pytest.mark.parametrize("algo,options,outer", [
    ("bmuf", {}, _bmuf_reference(2, 0.5, 1.0, True)),
    ("bmuf", {"bmuf_momentum": 0.75, "bmuf_lr": 0.8, "bmuf_nesterov": False},
     _bmuf_reference(2, 0.75, 0.8, False)),
    ("diloco", {}, _diloco_reference(0.7, 0.9)),
])
def test_two_learners_follow_the_definition(tmp_path, algo, options, outer):
    k, steps = 3, 8  # two whole blocks, then two local steps
    res = ok(run_learners({"algo": algo, "lr": 0.1, "momentum": 0.5, "steps": steps,
                           "options": {"avg_period": k, **options}}, 2, tmp_path))
    refs = blocks_reference(steps, k, 2, outer)
    for r in range(2):
        torch.testing.assert_close(res[r]["before"], refs[r], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(res[r]["final"], torch.stack(refs).mean(0), rtol=1e-5,
                                   atol=1e-6)
    assert res[0]["metrics"]["averages"] == steps // k
    assert not torch.equal(res[0]["before"], res[1]["before"])  # the last block is local


@pytest.mark.parametrize("algo,outer,is_sgd", [
    ("diloco", _diloco_reference(0.7, 0.9), False),
    ("bmuf", _bmuf_reference(1, 0.0, 1.0, True), True),
])
def test_one_learner_takes_the_outer_steps(tmp_path, algo, outer, is_sgd):
    """K = 1, the control that splits a gain between distribution and outer optimizer: the
    outer step still runs at each block's end. diloco's is a Nesterov look-ahead over SGD, not
    the single learner's run; bmuf's default at N = 1 (eta = 1 - 1/N = 0, zeta 1) steps to the
    block's end exactly, so by its definition it is plain SGD."""
    k, steps = 3, 8
    res = ok(run_learners({"algo": algo, "lr": 0.1, "momentum": 0.5, "steps": steps,
                           "options": {"avg_period": k}}, 1, tmp_path))
    refs = blocks_reference(steps, k, 1, outer)
    torch.testing.assert_close(res[0]["before"], refs[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(res[0]["final"], refs[0], rtol=1e-5, atol=1e-6)
    assert res[0]["metrics"]["averages"] == steps // k
    plain = blocks_reference(steps, k, 1, lambda start, mean: mean)  # no outer step: SGD
    assert torch.allclose(refs[0], plain[0]) == is_sgd


def test_diloco_lr1_momentum0_is_ma_bit_for_bit(tmp_path):
    sc = {"lr": 0.1, "momentum": 0.5, "steps": 7, "history": True}
    ma = ok(run_learners({**sc, "algo": "ma", "options": {"avg_period": 3}}, 2, tmp_path / "ma"))
    diloco = ok(run_learners({**sc, "algo": "diloco", "options": {
        "avg_period": 3, "diloco_lr": 1.0, "diloco_momentum": 0.0}}, 2, tmp_path / "diloco"))
    for a, b in zip(ma, diloco, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a["history"], b["history"], strict=True))
        assert torch.equal(a["final"], b["final"])


@pytest.mark.parametrize("algo", ["bmuf", "diloco"])
def test_resume_inside_a_block_is_the_uninterrupted_run(tmp_path, algo):
    """A checkpoint after step 5 (blocks end after 3, 6, 9): the resumed run needs the outer
    state (w_g, and v or the outer momentum) to take the next two outer steps exactly."""
    sc = {"algo": algo, "lr": 0.1, "momentum": 0.5, "steps": 10, "options": {"avg_period": 3}}
    saved = resumes_exactly(sc, 5, tmp_path)
    assert saved["averages"] == 1 and saved["outer"]["start"] is not None
    assert (saved["outer"].get("v") if algo == "bmuf" else saved["outer"].get("b")) is not None
