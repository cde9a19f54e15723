"""asrdist.parallel.rules.compression: a learner's --compress as one object, its parts made on
demand, their state in one entry (parts made after a resume start from what was saved)."""

from __future__ import annotations

import pytest
import torch

from asrdist.parallel.rules.compress import GradientCompression, compressed_mean
from asrdist.parallel.rules.compression import Compression


@pytest.mark.parametrize("name, learners", [("none", 4), ("int8", 1), ("powersgd", 1)])
def test_no_codec_or_one_learner_has_no_parts_and_no_state(name, learners):
    c = Compression(name, learners, 0)
    assert not c.active
    assert (c.codec, c.sender(), c.mean("model"), c.gradient()) == (None, None, None, None)
    assert c.state_dict() == {}


def test_a_resumed_sender_sends_what_the_uninterrupted_one_sends():
    x, y = torch.linspace(-1, 1, 300), torch.linspace(2, -3, 300)
    first = Compression("1bit", 2, 0)
    first.sender().compress(x)
    state = first.state_dict()
    assert set(state) == {"sender"} and state["sender"]["residual"].abs().sum() > 0
    resumed = Compression("1bit", 2, 0)
    resumed.load_state_dict(state)
    assert torch.equal(resumed.sender().compress(y)[0], first.sender().compress(y)[0])


def test_a_mean_made_after_loading_starts_from_its_saved_state_and_others_are_kept():
    """As a streaming-diloco resume: the state is loaded before wrap_model makes the
    fragments' means; a mean not made again stays in the state as it was loaded."""
    vectors = [torch.randn(700, generator=torch.Generator().manual_seed(r)) for r in range(2)]
    run = [Compression("int8", 2, r) for r in range(2)]
    compressed_mean(vectors, [c.mean("fragment0") for c in run])
    compressed_mean(vectors, [c.mean("fragment1") for c in run])
    run[0].reference = torch.ones(3)
    saved = [c.state_dict() for c in run]
    assert set(saved[0]) == {"reference", "means"}
    assert set(saved[0]["means"]) == {"fragment0", "fragment1"}

    resumed = [Compression("int8", 2, r) for r in range(2)]
    for c, s in zip(resumed, saved, strict=True):
        c.load_state_dict(s)
    assert torch.equal(resumed[0].reference, torch.ones(3))
    again = compressed_mean(vectors, [c.mean("fragment0") for c in resumed])
    assert torch.equal(again, compressed_mean(vectors, [c.mean("fragment0") for c in run]))
    kept = resumed[0].state_dict()["means"]["fragment1"]
    assert torch.equal(kept["sent"]["residual"], saved[0]["means"]["fragment1"]["sent"]["residual"])


def test_the_gradient_part_is_made_by_the_maker_given_with_the_options():
    made = []

    def maker(name: str, rank: int, error_feedback: bool, rank_of_p: int) -> GradientCompression:
        made.append((name, rank, error_feedback, rank_of_p))
        return GradientCompression(name, 3, rank, error_feedback, rank_of_p)

    c = Compression("fp8", 3, 2, error_feedback=False, powersgd_rank=4)
    assert c.gradient(maker) is c.gradient(maker) and made == [("fp8", 2, False, 4)]
    assert set(c.state_dict()) == {"gradient"}
    assert isinstance(Compression("bf16", 2, 0).gradient(), GradientCompression)


def _equal(a, b) -> bool:
    """Nested dicts, lists and tensors equal, tensors bit for bit."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_equal, a, b))
    return a == b


REF = torch.ones(3)
MEAN = {"sent": {"residual": torch.arange(4.0)}, "owned": {"residual": None}}


@pytest.mark.parametrize("old, new", [
    # adpsgd and diloco-async (1328961's strategy states): the sender's residual
    ({"merged": 2, "compress": MEAN["sent"]}, {"merged": 2, "compress": {"sender": MEAN["sent"]}}),
    # ma, bmuf, diloco: the reference and the one mean's residuals beside it
    ({"averages": 1, "compress": {"reference": REF, **MEAN}},
     {"averages": 1, "compress": {"reference": REF, "means": {"model": MEAN}}}),
    # ssgd: its gradient compression's state, whatever its keys (PowerSGD's too)
    ({"compress": MEAN}, {"compress": {"gradient": MEAN}}),
    ({"compress": {"iter": 5, "layouts": {0: [1, 0]}}},
     {"compress": {"gradient": {"iter": 5, "layouts": {0: [1, 0]}}}}),
    # streaming-diloco: one mean per fragment, inside the fragments
    ({"averages": 3, "fragments": [{"start": REF, "compress": MEAN}, {"start": REF}]},
     {"averages": 3, "fragments": [{"start": REF}, {"start": REF}],
      "compress": {"means": {"fragment0": MEAN}}}),
    ({"merged": 0}, {"merged": 0}),  # no --compress: as it was
])
def test_a_format3_strategy_state_becomes_the_one_compress_entry(old, new):
    from asrdist.parallel.rules.compression import from_format3

    assert _equal(from_format3(old), new)
