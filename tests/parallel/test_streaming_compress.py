"""streaming-diloco --compress: the compressed mean started at a block's end and waited for tau
steps later (Transport.start_compressed_mean_), on processes (a communication thread) and in
the simulator (a meeting nobody waits at).

Expected weights come from test_streaming's reference loop (the blocking mean's maths: the
compressed mean of the updates taken at the block's end, applied tau steps later); times and
bytes are computed by hand from the speed model and the int8 codec's sizes.
"""

from __future__ import annotations

import pytest
import torch

from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from tests.parallel._learner import batch, make_model
from tests.parallel.conftest import ok, resumes_exactly, run_learners
from tests.parallel.test_streaming import streaming_reference

# int8 at 2 learners: a fragment of 25 or 18 floats is padded to 2 chunks of one 256-value
# block; a chunk's payload is 4 bytes of scale + 256 bytes, and each learner sends one chunk
# in each of the two phases
INT8_CHUNK = 4 + 256
INT8_MEAN = 2 * INT8_CHUNK  # sent by each of 2 learners per mean
WEIGHTS = 43 * 4  # make_model's weights, float32


def _mse(i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
    x, y = batch(k, i, 8, False)
    return torch.nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize("n,fragments,groups,tau", [
    (2, 2, [[0, 1], [2, 3]], 1),
    # fragments one step apart and tau 2: two means in flight at once, run in order
    (3, 3, [[0], [1, 2], [3]], 2),
])
def test_processes_equal_the_simulator_and_the_blocking_maths(tmp_path, n, fragments, groups,
                                                              tau):
    """k = 4, 10 steps, int8: the weights after every step on processes, in the simulator and
    in the reference loop agree; the codec did change them."""
    steps = 10
    options = {"avg_period": 4, "stream_fragments": fragments, "stream_delay": tau,
               "compress": "int8"}
    real = ok(run_learners({"algo": "streaming-diloco", "lr": 0.1, "momentum": 0.5,
                            "steps": steps, "options": options, "history": True}, n, tmp_path))
    sim = simulate("streaming-diloco", n, steps, lambda i: make_model(0),
                   lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5), _mse,
                   speed=SpeedModel(jitter=0.5, latency_s=0.3), options=options,
                   keep_history=True)
    before, final = streaming_reference(steps, 4, n, groups, tau, 0.0, compress="int8")
    plain, _ = streaming_reference(steps, 4, n, groups, tau, 0.0)
    for r in range(n):
        for k in range(steps):
            torch.testing.assert_close(sim.history[r][k], real[r]["history"][k + 1],
                                       rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(real[r]["before"], before[r], rtol=1e-5, atol=1e-6)
        assert not torch.allclose(before[r], plain[r], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(real[0]["final"], final, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sim.final, final, rtol=1e-5, atol=1e-6)


def test_sent_bytes_are_the_blocking_mean_s(tmp_path):
    """2 learners, k = 4, 10 steps, tau 1: the wrap's float32 average (each learner sends half
    of a 2-learner ring: 172 bytes) and four int8 means (after steps 4 and 8 for fragment 0,
    6 and 10 for fragment 1) by the metrics, taken before the final average."""
    options = {"avg_period": 4, "stream_delay": 1, "compress": "int8"}
    res = ok(run_learners({"algo": "streaming-diloco", "lr": 0.1, "steps": 10,
                           "options": options}, 2, tmp_path))
    for r in res:
        assert r["metrics"]["sent_bytes"] == WEIGHTS + 4 * INT8_MEAN == 172 + 2080


def test_the_delay_hides_the_compressed_mean_in_the_simulator():
    """2 learners, 1 s steps, 400 bytes/s: the wrap's float32 average takes 172/400 = 0.43 s,
    an int8 fragment mean (2 chunk payloads sent per learner, a ring of 520 bytes) 1.3 s.
    k = 4, 8 steps: means start after steps 4, 8 (fragment 0) and 6 (fragment 1). tau 0, and
    the blocking mean whatever tau (main's code before the started one), wait 1.3 s for each:
    0.43 + 3 * 1.3 = 4.33 s by the last step. tau 1: the next step's 1 s hides 1 s of the
    first two, 0.3 s each is waited; the one started at step 8 is waited (1.3 s) at the end,
    after the last step: 0.43 + 2 * 0.3 = 1.03 s. The bytes are the same."""
    def run(tau: int):
        return simulate("streaming-diloco", 2, 8, lambda i: make_model(0),
                        lambda m: torch.optim.SGD(m.parameters(), lr=0.1), _mse,
                        speed=SpeedModel(compute_s=1.0, bandwidth=400.0),
                        options={"avg_period": 4, "stream_delay": tau, "compress": "int8"})

    now, late = run(0), run(1)
    assert now.summary["wait_s"] == pytest.approx([0.43 + 3 * 1.3] * 2)
    assert late.summary["wait_s"] == pytest.approx([0.43 + 2 * 0.3] * 2)
    # the end: the mean still due (tau 1), the final average and the 4-byte stop vote
    assert now.summary["time_s"] == pytest.approx(0.43 + 8 + 3 * 1.3 + 0.43 + 0.01)
    assert late.summary["time_s"] == pytest.approx(0.43 + 8 + 2 * 0.3 + 1.3 + 0.43 + 0.01)
    wire = 2 * WEIGHTS + 3 * 2 * INT8_MEAN + 2 * WEIGHTS + 2 * 4  # every learner's sends
    assert now.summary["wire_bytes"] == late.summary["wire_bytes"] == {"node": 0.0,
                                                                       "cross": wire}


def test_a_learner_lost_during_a_started_mean_ends_the_job_named(tmp_path):
    """Learner 1 is killed before its step 4: learner 0's mean started after step 4 cannot
    finish on the communication thread, and learner 0 does not hang at the wait: the job ends
    within the timeout naming learner 1 (here the liveness thread sees it gone first; a
    collective failing on the thread is raised at the wait and named the same way)."""
    timeout_s = 4.0
    sc = {"algo": "streaming-diloco", "lr": 0.1, "steps": 8, "timeout_s": timeout_s,
          "kill_at": 3, "kill_rank": 1,
          "options": {"avg_period": 4, "stream_delay": 1, "compress": "int8"}}
    run = run_learners(sc, 2, tmp_path, timeout=30)
    assert run.codes[1] == -9
    assert run.codes[0] == 1
    assert "asrdist: learner 0:" in run.stderr[0] and "learner 1" in run.stderr[0], \
        run.stderr[0][-2000:]
    assert run.seconds[0] < timeout_s + 6


def test_resume_with_two_compressed_means_in_flight_is_the_uninterrupted_run(tmp_path):
    """3 fragments (phases 0, 1, 2 of k = 4), tau 2, int8, a checkpoint after step 6: the
    means started after steps 5 (fragment 1) and 6 (fragment 2) are both in flight there,
    due at steps 7 and 8; the checkpoint waits for both, and the resumed run is the
    uninterrupted one bit for bit."""
    sc = {"algo": "streaming-diloco", "lr": 0.1, "momentum": 0.5, "steps": 10,
          "options": {"avg_period": 4, "stream_fragments": 3, "stream_delay": 2,
                      "compress": "int8"}}
    saved = resumes_exactly(sc, 6, tmp_path)["fragments"]
    # steps counted from 0 in the state: due after steps 6 and 7
    assert [f["pending"] and f["pending"]["due"] for f in saved] == [None, 6, 7]
