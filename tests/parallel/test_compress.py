"""--compress: the codecs against hand-computed values, error feedback's residual by hand, the
compressed mean against a reference loop, and the option on every strategy: none is today's
run bit for bit, a lossy codec runs the same bits on real processes and in the simulator,
and a compressed run resumes exactly."""

from __future__ import annotations

import math

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.parallel.options import ProcessOptions
from asrdist.parallel.processes.ddp import GradientCodec
from asrdist.parallel.processes.transport import ProcessTransport
from asrdist.parallel.registry import make_options
from asrdist.parallel.rules.compress import (
    CODECS,
    CompressedMean,
    ErrorFeedback,
    GradientCompression,
    compressed_mean,
    make_codec,
)
from asrdist.parallel.strategy import Learner
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import make_model
from tests.parallel.conftest import ok, resumes_exactly, run_learners
from tests.simulate.test_run import mse, sgd

MULTI = [name for name, spec in registry.specs().items()
         if spec.multi_learner and "compress" in registry.algorithm_options(name)]


def _tensor(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


# -- the codecs, by hand ------------------------------------------------------------------------


def test_int8_blockwise_absmax_by_hand():
    # blocks of 4: absmax 127/64 (scale 1/64) and 127/32 (scale 1/32), exact in float
    x = _tensor([0.5, -1.0, 0.2, 1.984375, -0.1, 0.0, 3.96875])
    codec = make_codec("int8", block=4)
    payload = codec.encode(x)
    assert payload.dtype == torch.uint8 and payload.numel() == 2 * 4 + 7 == codec.wire_bytes(7)
    assert payload[:8].view(torch.float32).tolist() == [1 / 64, 1 / 32]
    # 0.2 * 64 = 12.8 -> 13; -0.1 * 32 = -3.2 -> -3
    assert payload[8:].view(torch.int8).tolist() == [32, -64, 13, 127, -3, 0, 127]
    assert codec.decode(payload, 7).tolist() == [0.5, -1.0, 13 / 64, 1.984375, -3 / 32, 0.0,
                                                 3.96875]


def test_fp8_blockwise_scale_by_hand():
    # scales 3.5/448 = 1/128 and 7/448 = 1/64; e4m3 has 3 mantissa bits: 25.6 -> 26, 6.4 -> 6.5
    x = _tensor([0.5, -1.0, 0.2, 3.5, -0.1, 0.0, 7.0])
    codec = make_codec("fp8", block=4)
    payload = codec.encode(x)
    assert payload.numel() == 15 == codec.wire_bytes(7)
    assert payload[:8].view(torch.float32).tolist() == [1 / 128, 1 / 64]
    assert codec.decode(payload, 7).tolist() == [0.5, -1.0, 26 / 128, 3.5, -6.5 / 64, 0.0, 7.0]


def test_one_bit_sign_and_mean_magnitude_by_hand():
    x = _tensor([0.5, -1.0, 0.25, 2.0, -0.1, 0.0, 3.0])
    codec = make_codec("1bit", block=4)
    payload = codec.encode(x)
    assert payload.numel() == 2 * 4 + 1 == codec.wire_bytes(7)
    s1, s2 = payload[:8].view(torch.float32).tolist()
    assert s1 == 3.75 / 4 and s2 == pytest.approx(3.1 / 3, rel=1e-7)
    assert payload[8].item() == 0b10110110  # + - + + | - + + (0 is +), one pad bit
    assert codec.decode(payload, 7).tolist() == pytest.approx(
        [s1, -s1, s1, s1, -s2, s2, s2], rel=0, abs=0)


def test_casts_by_hand():
    # 0.2 = 1.6 * 2^-3: bf16 keeps 7 mantissa bits (1.6015625), fp16 10 (1.599609375)
    x = _tensor([0.2, 3.0, -0.5])
    assert make_codec("bf16").roundtrip(x).tolist() == [0.2001953125, 3.0, -0.5]
    assert make_codec("fp16").roundtrip(x).tolist() == [0.199951171875, 3.0, -0.5]
    assert make_codec("bf16").wire_bytes(3) == 6 == make_codec("bf16").encode(x).numel()


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("numel", [1, 7, 8, 255, 256, 257, 1000])
def test_the_payload_is_exactly_wire_bytes(name, numel):
    codec = make_codec(name)
    x = torch.randn(numel, generator=torch.Generator().manual_seed(numel))
    payload = codec.encode(x)
    assert payload.dtype == torch.uint8 and payload.numel() == codec.wire_bytes(numel)
    back = codec.decode(payload, numel)
    assert back.shape == (numel,)
    if name == "none":
        assert torch.equal(back, x)
    elif name != "1bit":  # a quantizer's error is below half a step of its block's scale
        assert (back - x).abs().max() <= x.abs().max() / (8 if name == "fp8" else 127)


def test_a_block_of_zeros_decodes_to_zeros():
    for name in ("int8", "fp8", "1bit"):
        assert make_codec(name, block=4).roundtrip(torch.zeros(6)).tolist() == [0.0] * 6


def test_an_unknown_codec_is_one_line_naming_the_option():
    with pytest.raises(AsrdistError, match="--compress 'int4': choose one of"):
        make_codec("int4")


# -- error feedback, by hand ----------------------------------------------------------------------


def test_error_feedback_accumulates_the_residual_over_three_steps_by_hand():
    """1bit on one block of 4, the same x three times: C sends sign * mean|x + r| and keeps
    r = (x + r) - D(C(x + r)); what was sent plus what is kept is what was meant (3 x)."""
    x = _tensor([0.5, -1.0, 0.25, 2.0])
    ef = ErrorFeedback(make_codec("1bit", block=4))
    sent = []
    for expected_sent, expected_r in [
        # x + 0: mean |.| = 3.75 / 4
        ([0.9375, -0.9375, 0.9375, 0.9375], [-0.4375, -0.0625, -0.6875, 1.0625]),
        # x + r = [0.0625, -1.0625, -0.4375, 3.0625]: mean 4.625 / 4
        ([1.15625, -1.15625, -1.15625, 1.15625], [-1.09375, 0.09375, 0.71875, 1.90625]),
        # x + r = [-0.59375, -0.90625, 0.96875, 3.90625]: mean 6.375 / 4
        ([-1.59375, -1.59375, 1.59375, 1.59375], [1.0, 0.6875, -0.625, 2.3125]),
    ]:
        _, decoded = ef.compress(x)
        assert decoded.tolist() == expected_sent
        assert ef.residual.tolist() == expected_r
        sent.append(decoded)
    assert (torch.stack(sent).sum(0) + ef.residual).tolist() == (3 * x).tolist()


def test_error_feedback_off_or_lossless_keeps_no_residual():
    x = _tensor([0.5, -1.0, 0.25, 2.0])
    off = ErrorFeedback(make_codec("1bit", block=4), enabled=False)
    assert off.compress(x)[1].tolist() == off.compress(x)[1].tolist()
    assert off.residual is None
    lossless = ErrorFeedback(make_codec("none"))
    assert not lossless.enabled and torch.equal(lossless.compress(x)[1], x)


def test_error_feedback_state_round_trips():
    x = _tensor([0.5, -1.0, 0.25, 2.0])
    a = ErrorFeedback(make_codec("int8", block=4))
    a.compress(x)
    b = ErrorFeedback(make_codec("int8", block=4))
    b.load_state_dict(a.state_dict())
    assert torch.equal(a.compress(x)[0], b.compress(x)[0])


# -- the compressed mean, against a reference loop ------------------------------------------------


def _q8(v: torch.Tensor) -> torch.Tensor:
    """int8 absmax quantization of one block, written out (the reference)."""
    s = v.abs().max() / 127
    return v.clone() if s == 0 else torch.round(v / s).clamp(-127, 127) * s


def test_compressed_mean_is_reduce_scatter_then_all_gather_of_quantized_chunks():
    """Two learners, blocks of 2, 5 values: chunks of 4 (whole blocks), padded to 8. Learner
    j gets everyone's quantized chunk j, averages, quantizes the mean; all decode both."""
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(5, generator=g), torch.randn(5, generator=g)
    sides = [CompressedMean(make_codec("int8", block=2), 2, r, error_feedback=False)
             for r in range(2)]
    assert sides[0].chunk(5) == 4 and sides[0].wire_bytes(5) == 2 * (2 * 4 + 4)

    def q(v: torch.Tensor) -> torch.Tensor:
        return torch.cat([_q8(blk) for blk in v.split(2)])

    pa, pb = torch.cat([a, torch.zeros(3)]), torch.cat([b, torch.zeros(3)])
    expected = torch.cat([q((q(pa[:4]) + q(pb[:4])) / 2), q((q(pa[4:]) + q(pb[4:])) / 2)])[:5]
    torch.testing.assert_close(compressed_mean([a, b], sides), expected, rtol=0, atol=1e-6)


def test_compressed_mean_keeps_both_residuals():
    """With error feedback the first compression's residual (the whole padded vector) and the
    owner's (its mean chunk) are what the two quantizations lost."""
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(6, generator=g), torch.randn(6, generator=g)
    sides = [CompressedMean(make_codec("int8", block=3), 2, r) for r in range(2)]
    compressed_mean([a, b], sides)
    ra = sides[0].sent.residual
    torch.testing.assert_close(ra, a - torch.cat([_q8(a[:3]), _q8(a[3:])]), rtol=0, atol=1e-7)
    mean0 = (_q8(a[:3]) + _q8(b[:3])) / 2
    torch.testing.assert_close(sides[0].owned.residual, mean0 - _q8(mean0), rtol=0, atol=1e-7)


# -- the option ---------------------------------------------------------------------------------


def test_every_multi_learner_strategy_takes_the_option():
    assert {"ssgd", "ma", "bmuf", "diloco", "adpsgd-random", "hadpsgd"} <= set(MULTI)
    for name in MULTI:
        assert make_options(name, {"compress": "int8"}).compress == "int8"


def test_powersgd_is_ssgd_s_only_and_the_simulator_has_none():
    with pytest.raises(AsrdistError, match="--compress powersgd: only ssgd takes it"):
        make_options("ma", {"compress": "powersgd"})
    assert make_options("ssgd", {"compress": "powersgd", "compress_rank": 2}).compress_rank == 2
    with pytest.raises(AsrdistError, match="--compress powersgd: real processes only"):
        simulate("ssgd", 2, 1, make_model, sgd(0.1), mse, options={"compress": "powersgd"})
    with pytest.raises(AsrdistError, match="--compress-rank must be positive"):
        make_options("ssgd", {"compress_rank": 0})


def test_each_transport_makes_the_gradient_compression_it_runs():
    """The processes' adds DDP's hooks to the rules' form; a form another transport made is
    refused by name, rather than registering no hook (a mean that would not be taken)."""
    transport = ProcessTransport(Learner(), ProcessOptions())
    made = transport.gradient_compression("int8", rank=0)
    assert isinstance(made, GradientCodec) and made.side is not None
    assert made.wire_bytes(1000) == GradientCompression("int8", 1, 0).wire_bytes(1000)
    with pytest.raises(TypeError, match="GradientCompression is not this transport's"):
        transport.gradient_mean(make_model(0), compression=GradientCompression("int8", 1, 0))


def _node_options(algo: str) -> dict[str, int]:
    return {"learners_per_node": 2} if "learners_per_node" in registry.options_of(algo) else {}


@pytest.mark.parametrize("algo", MULTI)
def test_compress_none_is_today_s_run_bit_for_bit(algo):
    speed = SpeedModel(jitter=0.5, latency_s=0.01, bandwidth=1e6)
    runs = [simulate(algo, 4, 5, make_model, sgd(0.1, 0.9), mse, speed=speed,
                     options={**_node_options(algo), **extra})
            for extra in ({}, {"compress": "none"})]
    assert torch.equal(runs[0].final, runs[1].final)
    assert runs[0].summary["wire_bytes"] == runs[1].summary["wire_bytes"]


def _wide(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 256), torch.nn.Tanh(), torch.nn.Linear(256, 3))


FP32 = 2 * 2051 * 4  # a ring allreduce of the 2051 weights by 2 learners: each sends all
FLAGS = 2 * 4  # the stop flag's allreduce at the end
# blockwise codecs at 2 learners: chunks of 1280 values (5 blocks of 256); each learner sends
# one chunk payload and receives one in each phase: 2 payloads per learner and average
INT8_MEAN = 2 * 2 * (5 * 4 + 1280)
ONEBIT_MEAN = 2 * 2 * (5 * 4 + 1280 // 8)


@pytest.mark.parametrize("algo,codec,plain,compressed", [
    # 2 averages (steps 4 and 8) + the final one; compressed: a float32 reference first
    ("ma", "int8", 3 * FP32 + FLAGS, FP32 + 2 * INT8_MEAN + FP32 + FLAGS),
    # + the first block's w_g (an average) in both
    ("diloco", "1bit", 4 * FP32 + FLAGS, 2 * FP32 + 2 * ONEBIT_MEAN + FLAGS),
    # DDP's broadcast of the first learner's weights, 8 gradient means, the final average
    ("ssgd", "int8", FP32 // 2 + 9 * FP32 + FLAGS, FP32 // 2 + 8 * INT8_MEAN + FP32 + FLAGS),
    ("ssgd", "bf16", FP32 // 2 + 9 * FP32 + FLAGS, FP32 // 2 + 8 * FP32 // 2 + FP32 + FLAGS),
    # 8 swaps of the weights (both ways), the final average; int8: 9 scales + 2051 bytes
    ("adpsgd-fixed", "int8", 8 * FP32 + FP32 + FLAGS, 8 * 2 * (9 * 4 + 2051) + FP32 + FLAGS),
])
def test_the_simulator_charges_the_encoded_bytes(algo, codec, plain, compressed):
    """A 2051-weight model, 2 learners, 8 steps (ma, diloco: averaging every 4): the bytes on
    the wire, by hand."""
    speed = SpeedModel(latency_s=0.001, bandwidth=1e6)
    opts = {"avg_period": 4} if algo in ("ma", "diloco") else {}
    for c, expected in (("none", plain), (codec, compressed)):
        res = simulate(algo, 2, 8, _wide, sgd(0.01), mse, speed=speed,
                       options={**opts, "compress": c})
        assert res.summary["wire_bytes"] == {"node": 0.0, "cross": expected}, c


# -- real processes and the simulator ------------------------------------------------------------


@pytest.mark.parametrize("algo,n,options", [
    ("ma", 2, {"avg_period": 3, "compress": "int8"}),
    ("diloco", 3, {"avg_period": 2, "compress": "1bit"}),
    ("ssgd", 2, {"compress": "int8"}),
    ("ssgd", 2, {"compress": "bf16"}),
])
def test_lossy_synchronous_runs_agree_with_the_simulator(tmp_path, algo, n, options):
    steps = 7
    real = ok(run_learners({"algo": algo, "lr": 0.1, "momentum": 0.9, "steps": steps,
                            "options": options, "history": True}, n, tmp_path))
    sim = simulate(algo, n, steps, lambda i: make_model(0), sgd(0.1, 0.9), mse,
                   speed=SpeedModel(jitter=0.5, latency_s=0.01), options=options,
                   keep_history=True)
    plain = simulate(algo, n, steps, lambda i: make_model(0), sgd(0.1, 0.9), mse,
                     options={k: v for k, v in options.items() if k != "compress"})
    for r in range(n):
        for k in range(steps):
            torch.testing.assert_close(sim.history[r][k], real[r]["history"][k + 1],
                                       rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.final, real[0]["final"], rtol=1e-5, atol=1e-6)
    assert not torch.equal(sim.final, plain.final)  # the codec did lose something
    assert real[0]["metrics"]["sent_bytes"] > 0


@pytest.mark.parametrize("algo,n,options", [
    ("adpsgd-fixed", 3, {"compress": "int8"}),
    ("adpsgd-delay1", 3, {"compress": "1bit"}),
    ("hadpsgd", 6, {"learners_per_node": 2, "hadpsgd_variant": "random", "compress": "fp8"}),
])
def test_lossy_pairwise_exchange_agrees_with_the_simulator_and_keeps_the_sum(tmp_path, algo, n,
                                                                             options):
    """lr = 0, one active learner (or super-learner) among three: the ring schedule's order
    whatever the timing. Each side's delta is half the difference of the decoded vectors, so
    the two deltas are exact negatives and the mean of the weights stays put."""
    steps, options = 9, {"seed": 3, **options}
    real = ok(run_learners({"algo": algo, "lr": 0.0, "steps": steps, "init": "rank",
                            "compute_s": 0.002, "history": True, "options": options},
                           n, tmp_path))
    speed = SpeedModel(jitter=0.5, latency_s=0.3)
    sim = simulate(algo, n, steps, make_model, sgd(0.0), mse, options=options, speed=speed,
                   keep_history=True)
    active = n // 3
    for k in range(steps):
        torch.testing.assert_close(sim.history[active][k], real[active]["history"][k + 1],
                                   rtol=0, atol=1e-6)
    torch.testing.assert_close(sim.final, torch.stack(sim.start).mean(0), rtol=0, atol=1e-6)
    torch.testing.assert_close(real[0]["final"], sim.final, rtol=0, atol=1e-6)
    assert not torch.allclose(sim.history[active][1], sim.start[active])  # exchanges moved it
    exact = simulate(algo, n, steps, make_model, sgd(0.0), mse, speed=speed, keep_history=True,
                     options={k: v for k, v in options.items() if k != "compress"})
    assert not torch.equal(exact.history[active][-1], sim.history[active][-1])  # it lost some
    if algo == "adpsgd-fixed":  # the active learner's payloads: scales and one byte a weight
        assert real[1]["metrics"]["sent_bytes"] == real[1]["metrics"]["exchanges"] * \
            make_codec("int8").wire_bytes(43) == real[1]["metrics"]["exchanges"] * (4 + 43)


@pytest.mark.parametrize("algo,options", [
    ("diloco", {"avg_period": 3, "compress": "int8"}),
    ("ssgd", {"compress": "1bit"}),
    ("ssgd", {"compress": "powersgd"}),
])
def test_a_compressed_run_resumes_exactly(tmp_path, algo, options):
    """A checkpoint after step 5: the residuals (and diloco's reference; PowerSGD's error
    feedback and factors, in the layout of DDP's rebuilt buckets, which a restarted process
    has again only after its first step) are in it, so the resumed run is the uninterrupted
    one bit for bit."""
    sc = {"algo": algo, "lr": 0.1, "momentum": 0.5, "steps": 10, "options": options}
    compress = resumes_exactly(sc, 5, tmp_path)["compress"]  # the strategy's one entry
    if options["compress"] == "powersgd":  # the rebuilt bucket: the Sequential reversed
        saved = compress["gradient"]
        assert saved["layouts"] == {0: [3, 2, 1, 0]} and saved["iter"] == 5
        return
    if algo == "diloco":  # the block's mean, its updates taken from w_g
        assert set(compress) == {"reference", "means"} and set(compress["means"]) == {"model"}
        saved = compress["means"]["model"]
    else:
        assert set(compress) == {"gradient"}
        saved = compress["gradient"]
    assert saved["sent"]["residual"] is not None and saved["owned"]["residual"] is not None
    assert math.isfinite(float(saved["sent"]["residual"].abs().sum()))


def test_powersgd_is_torch_s_hook_on_ssgd(tmp_path):
    """Two learners, 6 steps: torch's PowerSGD (rank 1; plain allreduce for its first two
    steps) keeps the learners identical, changes the run from step 3 on, and its state (error
    feedback, P and Q) is the strategy's."""
    sc = {"algo": "ssgd", "lr": 0.1, "momentum": 0.5, "steps": 6, "history": True}
    power = ok(run_learners({**sc, "options": {"compress": "powersgd"}}, 2, tmp_path / "p"))
    plain = ok(run_learners(sc, 2, tmp_path / "plain"))
    assert torch.equal(power[0]["before"], power[1]["before"])
    assert all(torch.equal(a, b) for a, b in zip(power[0]["history"][:3],
                                                 plain[0]["history"][:3], strict=True))
    assert not torch.allclose(power[0]["history"][4], plain[0]["history"][4])
    state = power[0]["state"]["compress"]["gradient"]
    assert state["iter"] == 6 and state["matrix_approximation_rank"] == 1
    assert set(state["error_dict"]) == {0}
    # bytes by hand (2 learners: a ring allreduce sends the vector once): two plain steps of
    # the 43 weights, then 4 steps of what PowerSGD sends: the 5 x 4 weight as rank-1 factors
    # (5 + 4 values), the 3 x 5 one whole (15 >= 2 x 8 fails its min_compression_rate), both
    # biases whole (5 + 3)
    assert power[0]["metrics"]["sent_bytes"] == 2 * 43 * 4 + 4 * (9 + 15 + 8) * 4
