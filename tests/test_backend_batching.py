"""The stand-in backends' request batching (serve/backends/modelship_backend.py `run_requests`): the requests of
one Triton batch that can share a forward pass are concatenated, run once and split back in order; a failing
group fails only its own requests."""

from __future__ import annotations

import numpy as np
import pytest

from modelship.contract.tensors import Tensors
from modelship.serve.backends.modelship_backend import run_requests


class Recorder:
    """A model that doubles `x` (and adds `y` when given), remembering the batch shapes it ran."""

    def __init__(self, fail_width: int | None = None) -> None:
        self.calls: list[tuple[int, ...]] = []
        self.fail_width = fail_width

    def __call__(self, feed: Tensors) -> Tensors:
        self.calls.append(feed["x"].shape)
        if feed["x"].shape[1] == self.fail_width:
            raise ValueError("bad width")
        out = feed["x"] * 2
        return {"out": out + feed["y"] if "y" in feed else out}


def request(rows: int, width: int = 2, start: float = 0.0, dtype: str = "float32") -> Tensors:
    return {"x": np.arange(rows * width, dtype=dtype).reshape(rows, width) + start}


def test_same_shape_requests_run_as_one_batch_and_split_back_in_order() -> None:
    model = Recorder()
    feeds = [request(1, start=0), request(3, start=10), request(2, start=100)]
    results = run_requests(feeds, model, batched=True)
    assert model.calls == [(6, 2)]
    for feed, result in zip(feeds, results, strict=True):
        np.testing.assert_array_equal(result["out"], feed["x"] * 2)


def test_interleaved_shapes_form_groups_and_keep_request_order() -> None:
    model = Recorder()
    feeds = [request(1, 2), request(1, 3), request(2, 2), request(1, 3)]
    results = run_requests(feeds, model, batched=True)
    assert sorted(model.calls) == [(2, 3), (3, 2)]
    assert [r["out"].shape for r in results] == [(1, 2), (1, 3), (2, 2), (1, 3)]
    np.testing.assert_array_equal(results[2]["out"], feeds[2]["x"] * 2)


def test_different_dtypes_are_never_merged() -> None:
    model = Recorder()
    run_requests([request(1), request(1, dtype="float64")], model, batched=True)
    assert model.calls == [(1, 2), (1, 2)]


def test_every_input_is_concatenated_together() -> None:
    model = Recorder()
    feeds = [{**request(1), "y": np.full((1, 2), 5.0, np.float32)}, {**request(2), "y": np.ones((2, 2), np.float32)}]
    results = run_requests(feeds, model, batched=True)
    assert model.calls == [(3, 2)]
    np.testing.assert_array_equal(results[0]["out"], feeds[0]["x"] * 2 + 5)
    np.testing.assert_array_equal(results[1]["out"], feeds[1]["x"] * 2 + 1)


def test_a_failing_group_fails_only_its_requests() -> None:
    results = run_requests([request(1, 2), request(2, 3), request(1, 2)], Recorder(fail_width=3), batched=True)
    assert isinstance(results[1], ValueError)
    assert [r["out"].shape for r in (results[0], results[2])] == [(1, 2), (1, 2)]


@pytest.mark.parametrize("count", [1, 3])
def test_unbatched_models_run_each_request_alone(count: int) -> None:
    model = Recorder()
    results = run_requests([request(1) for _ in range(count)], model, batched=False)
    assert model.calls == [(1, 2)] * count and len(results) == count
