"""The parity engine's pure parts: metrics, tolerances, generated inputs, golden files, reports."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modelship.contract.errors import ParityError, UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.parity import (
    GoldenRunner,
    Tolerance,
    ToleranceConfig,
    compare_arrays,
    compare_runners,
    input_sets,
    load_golden,
    random_inputs,
    render_table,
    save_golden,
)
from modelship.parity.metrics import REL_EPS
from modelship.parity.runner_protocol import BaseRunner

STRICT = Tolerance(atol=1e-4, rtol=1e-3)


def test_metrics_on_known_differences() -> None:
    ref = np.array([[1.0, 2.0, 0.0, -4.0]], dtype=np.float32)
    cand = ref + np.array([[0.1, -0.2, 0.0, 0.4]], dtype=np.float32)
    m = compare_arrays("logits", ref, cand, STRICT)
    assert m.max_abs == pytest.approx(0.4, rel=1e-6)
    assert m.max_rel == pytest.approx(0.1, rel=1e-5)  # 0.1/1, 0.2/2, 0/eps, 0.4/4
    assert m.mean_abs == pytest.approx(0.175, rel=1e-6)
    assert m.median_abs == pytest.approx(0.15, rel=1e-6)
    assert m.top1_agreement == 1.0 and m.topk_agreement == 1.0
    assert not m.passed and "max abs diff" in m.failures[0]


def test_required_tolerance_is_the_smallest_that_passes() -> None:
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 50)).astype(np.float32)
    cand = ref + rng.normal(0, 1e-2, ref.shape).astype(np.float32)
    m = compare_arrays("y", ref, cand, STRICT)
    assert not m.passed
    assert np.allclose(cand, ref, atol=m.required_atol, rtol=STRICT.rtol)
    assert not np.allclose(cand, ref, atol=m.required_atol * 0.99, rtol=STRICT.rtol)
    assert np.allclose(cand, ref, atol=STRICT.atol, rtol=m.required_rtol * 1.0001)
    again = compare_arrays("y", ref, cand, Tolerance(atol=m.required_atol, rtol=STRICT.rtol))
    assert again.passed


def test_relative_error_does_not_explode_on_zeros() -> None:
    ref = np.zeros((2, 3), dtype=np.float32)
    cand = np.full((2, 3), 1e-7, dtype=np.float32)
    m = compare_arrays("y", ref, cand, STRICT)
    assert np.isfinite(m.max_rel) and m.max_rel == pytest.approx(1e-7 / REL_EPS, rel=1e-3)
    assert m.passed


def test_nan_in_candidate_fails_and_is_counted() -> None:
    ref = np.ones((2, 4), dtype=np.float32)
    cand = ref.copy()
    cand[1, 2] = np.nan
    cand[0, 0] = np.inf
    m = compare_arrays("y", ref, cand, STRICT)
    assert (m.nan_count, m.inf_count, m.reference_nan_count) == (1, 1, 0)
    assert not m.passed and "non-finite" in m.failures[0]
    assert m.max_abs == 0.0  # statistics cover the finite positions only


def test_matching_non_finite_values_pass() -> None:
    ref = np.array([[1.0, np.nan, -np.inf]])
    m = compare_arrays("y", ref, ref.copy(), STRICT)
    assert m.passed and m.reference_nan_count == 1 and m.reference_inf_count == 1


def test_shape_mismatch_fails_cleanly() -> None:
    m = compare_arrays("y", np.zeros((2, 10)), np.zeros((2, 9)), STRICT)
    assert not m.passed and m.failures == ["shape (2, 9) differs from reference (2, 10)"]
    json.dumps(m.to_dict())  # infinities are serialised as strings


def test_cosine_and_top1_floors() -> None:
    ref = np.array([[0.0, 1.0, 0.9], [3.0, 0.0, 0.0]], dtype=np.float32)
    cand = np.array([[0.0, 0.9, 1.0], [3.0, 0.0, 0.0]], dtype=np.float32)
    tol = Tolerance(atol=1.0, rtol=0.0, min_cosine=0.999, min_top1=0.9)
    m = compare_arrays("logits", ref, cand, tol)
    assert m.top1_agreement == 0.5
    assert m.cosine == pytest.approx((0.9 + 0.9) / (1.81), rel=1e-6)
    assert any("cosine" in f for f in m.failures) and any("top-1" in f for f in m.failures)


def test_top1_only_for_classifier_shaped_outputs() -> None:
    assert compare_arrays("y", np.ones((2, 3, 4)), np.ones((2, 3, 4)), STRICT).top1_agreement is None
    assert compare_arrays("y", np.ones((2, 1)), np.ones((2, 1)), STRICT).top1_agreement is None
    assert compare_arrays("y", np.ones((2,), np.int64), np.ones((2,), np.int64), STRICT).top1_agreement is None


def test_fp16_candidate_is_compared_in_float() -> None:
    ref = np.linspace(-5, 5, 20, dtype=np.float32).reshape(2, 10)
    m = compare_arrays("y", ref, ref.astype(np.float16), ToleranceConfig.for_precision("fp16").default)
    assert m.passed and 0 < m.max_abs < 5e-3


def test_tolerance_config_precisions_and_overrides() -> None:
    fp32 = ToleranceConfig.for_precision("fp32")
    fp16 = ToleranceConfig.for_precision("fp16")
    assert fp32.default.atol < fp16.default.atol and fp32.default.rtol < fp16.default.rtol
    assert fp16.default.min_top1 is not None
    cfg = ToleranceConfig.for_precision("fp16", {"atol": 0.1, "per_output": {"logits": {"min_top1": 0.5}}})
    assert cfg.default.atol == 0.1
    assert cfg.for_output("logits").min_top1 == 0.5 and cfg.for_output("logits").atol == 0.1
    assert cfg.for_output("other") == cfg.default
    keyed = ToleranceConfig.for_precision("fp32", {"fp16": {"atol": 1.0}, "fp32": {"rtol": 0.5}})
    assert keyed.default.rtol == 0.5 and keyed.default.atol == fp32.default.atol
    assert ToleranceConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(UsageError, match="unknown tolerance field"):
        ToleranceConfig.for_precision("fp32", {"atl": 1})
    with pytest.raises(UsageError, match="atol must be"):
        Tolerance(atol=-1, rtol=0)
    with pytest.raises(UsageError, match="unknown precision 'int4'"):
        ToleranceConfig.for_precision("int4")


def test_random_inputs_honour_dtype_and_range() -> None:
    io = IOSpec(
        (
            TensorSpec("pixels", ("batch", 3, 4, 4)),
            TensorSpec("scaled", ("batch", 5), "float16", (0.0, 1.0)),
            TensorSpec("input_ids", ("batch", "sequence"), "int64", (5, 100)),
            TensorSpec("attention_mask", ("batch", "sequence"), "int64", (0, 2)),
        )
    )
    x = random_inputs(io, {"batch": 64, "sequence": 12}, seed=3)
    assert x["pixels"].dtype == np.float32 and x["pixels"].shape == (64, 3, 4, 4)
    assert abs(float(x["pixels"].mean())) < 0.1 and 0.9 < float(x["pixels"].std()) < 1.1
    assert x["scaled"].dtype == np.float16 and x["scaled"].min() >= 0 and x["scaled"].max() <= 1
    assert x["input_ids"].dtype == np.int64 and x["input_ids"].min() >= 5 and x["input_ids"].max() < 100
    mask = x["attention_mask"]
    assert set(np.unique(mask)) == {0, 1} and (mask[:, 0] == 1).all()
    again = random_inputs(io, {"batch": 64, "sequence": 12}, seed=3)
    assert all(np.array_equal(x[k], again[k]) for k in x)
    sets = input_sets(io, [1, 8])
    assert [s["input_ids"].shape for s in sets] == [(1, 16), (8, 16)]
    with pytest.raises(UsageError, match="sequence"):
        random_inputs(io, {"batch": 1})


def test_golden_round_trip(tmp_path) -> None:
    inputs = [{"x": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.array([[1, 2]], np.int64)}]
    outputs = [{"logits": np.ones((2, 4), np.float16), "pooled.out": np.zeros(3)}]
    path = tmp_path / "golden.npz"
    save_golden(path, inputs, outputs)
    got_in, got_out = load_golden(path)
    assert got_in[0].keys() == inputs[0].keys() and got_out[0].keys() == outputs[0].keys()
    for a, b in ((got_in[0], inputs[0]), (got_out[0], outputs[0])):
        for key in a:
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key])
    with pytest.raises(ParityError, match="not found"):
        load_golden(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", a=np.zeros(1))
    with pytest.raises(ParityError, match="not a modelship golden"):
        load_golden(tmp_path / "other.npz")


class _Scaled(BaseRunner):
    def __init__(self, name: str, scale: float) -> None:
        self.name, self.scale = name, scale

    def run(self, inputs):
        return {"logits": inputs["x"] * self.scale}


class _Broken(BaseRunner):
    name = "broken"

    def run(self, inputs):
        raise ParityError("boom")


def test_compare_runners_aggregates_worst_case_and_renders() -> None:
    io = IOSpec((TensorSpec("x", ("batch", 10)),), (TensorSpec("logits", ("batch", 10)),))
    sets = input_sets(io, [1, 4])
    tol = ToleranceConfig.for_precision("fp32")
    report = compare_runners(_Scaled("ref", 1.0), _Scaled("cand", 1.0 + 1e-6), sets, tol)
    assert report.passed and report.batch_sizes == [1, 4] and len(report.per_batch) == 2
    (out,) = report.outputs
    assert out.samples == 5 and out.shape == (-1, 10)
    worst = max(float(np.abs(s["x"] * (1.0 + 1e-6) - s["x"]).max()) for s in sets)
    assert out.max_abs == pytest.approx(worst, rel=1e-3)
    bad = compare_runners(_Scaled("ref", 1.0), _Scaled("cand", 1.1), sets, tol)
    assert not bad.passed and bad.failures() and "FAIL" in bad.summary_line()
    crashed = compare_runners(_Scaled("ref", 1.0), _Broken(), sets, tol)
    assert not crashed.passed and "boom" in crashed.error
    json.dumps([r.to_dict() for r in (report, bad, crashed)])
    assert render_table([report, bad, crashed]).row_count == 3


def test_golden_runner_replays_and_rejects_unknown_inputs() -> None:
    inputs = [{"x": np.ones((1, 2), np.float32)}]
    runner = GoldenRunner(inputs, [{"y": np.zeros(2)}])
    assert runner.run({"x": np.ones((1, 2), np.float32)})["y"].shape == (2,)
    with pytest.raises(ParityError, match="not in the golden data"):
        runner.run({"x": np.zeros((1, 2), np.float32)})
