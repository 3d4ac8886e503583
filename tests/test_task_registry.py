"""Adding a task is one module plus registry entries: a toy "regression" task (one float per row, judged by
relative error) is registered entirely from inside this test, with its own compare function and result type, and
then goes the way users go: export-model chooses it from the model's outputs, verifies every artifact with its
compare function, records it in the manifest; `modelship parity` judges the artifacts the same way; publish writes
no labels for it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from torch import nn

from modelship.contract.manifest import Manifest
from modelship.contract.parity_report import RESULT_TYPES, ParityReport, register_result
from modelship.contract.tensors import Tensors
from modelship.parity import (
    COMPARE_FUNCTIONS,
    CompareFunction,
    Tolerance,
    ToleranceConfig,
    compare_runners,
    register_compare,
)
from modelship.parity.runner_protocol import BaseRunner
from modelship.tasks import TASKS, Preprocessing, Task, choose_task, register_task
from tests.cli_contract import invoke

REL_EPS = 1e-6


@dataclass
class RelativeError:
    """The toy task's result: the largest relative error of one output."""

    name: str
    max_rel: float
    passed: bool = True
    failures: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "relative"

    def figures(self) -> dict[str, str]:
        return {"max rel": f"{self.max_rel:.1e}"}

    def summary(self) -> str:
        return f"{self.name} max_rel {self.max_rel:.2g}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "max_rel": self.max_rel,
            "passed": self.passed,
            "failures": self.failures,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RelativeError:
        return cls(data["name"], float(data["max_rel"]), bool(data["passed"]), list(data["failures"]))


def _judged(name: str, max_rel: float, tolerance: Tolerance) -> RelativeError:
    failures = [] if max_rel <= tolerance.rtol else [f"relative error {max_rel:.3g} above rtol {tolerance.rtol:g}"]
    return RelativeError(name, max_rel, not failures, failures)


def compare(name: str, reference: np.ndarray, candidate: np.ndarray, tolerance: Tolerance) -> RelativeError:
    if np.shape(reference) != np.shape(candidate):
        return missing(name, reference, f"shape {np.shape(candidate)} differs from {np.shape(reference)}")
    ref = np.asarray(reference, np.float64)
    rel = np.abs(np.asarray(candidate, np.float64) - ref) / np.maximum(np.abs(ref), REL_EPS)
    return _judged(name, float(rel.max(initial=0.0)), tolerance)


def aggregate(results: Sequence[RelativeError], tolerance: Tolerance) -> RelativeError:
    reasons = [f for r in results for f in r.failures if not f.startswith("relative error")]
    worst = _judged(results[0].name, max(r.max_rel for r in results), tolerance)
    worst.failures = reasons + worst.failures
    worst.passed = not worst.failures
    return worst


def missing(name: str, reference: np.ndarray, reason: str) -> RelativeError:
    return RelativeError(name, float("inf"), False, [reason])


def _claims(io: Any) -> bool:
    return len(io.outputs) == 1 and tuple(io.outputs[0].shape[1:]) == (1,)


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + 3.0  # away from zero, so relative error means something


def make_regressor() -> Regressor:
    return Regressor()


class Scaled(BaseRunner):
    """A candidate off by a relative `factor` from the reference's answer."""

    def __init__(self, reference: BaseRunner, factor: float) -> None:
        self.reference, self.factor, self.name = reference, factor, f"scaled {factor}"

    def run(self, inputs: Tensors) -> Tensors:
        return {k: v * self.factor for k, v in self.reference.run(inputs).items()}


class Model(BaseRunner):
    name = "eager"

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def run(self, inputs: Tensors) -> Tensors:
        with torch.inference_mode():
            return {"output": self.model(torch.from_numpy(inputs["x"])).numpy()}


@pytest.fixture(scope="module")
def regression() -> Iterator[Task]:
    """The toy task, its compare function and its result type, registered here and removed afterwards."""
    register_result(RelativeError)
    register_compare(CompareFunction("relative", "largest relative error", compare, aggregate, missing))
    task = register_task(
        Task(
            "regression",
            "one float per row, judged by relative error",
            lambda spec: "relative",
            _claims,
            preprocessing=Preprocessing.NONE,
        )
    )
    yield task
    TASKS.pop("regression")
    COMPARE_FUNCTIONS.pop("relative")
    RESULT_TYPES.pop("relative")


@pytest.fixture(scope="module")
def exported(regression: Task, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A regressor exported the way users export: a state_dict checkpoint through `export-model`."""
    root = tmp_path_factory.mktemp("regression")
    torch.manual_seed(0)
    torch.save(make_regressor().state_dict(), root / "reg.pt")
    result = invoke(
        "export",
        root / "reg.pt",
        "--arch",
        f"{__name__}:make_regressor",
        "--onnx",
        "--torchscript",
        "--input",
        "x:batch,4:float32",
        "--out",
        root / "exports",
        "--json",
    )
    assert result.exit_code == 0, result.output
    return root / "exports" / "reg"


def test_the_task_is_chosen_from_the_outputs_and_recorded(exported: Path) -> None:
    manifest = Manifest.read(exported)
    assert manifest.task == "regression"
    assert choose_task(manifest.io).name == "regression"
    for artifact in manifest.artifacts:
        (result,) = artifact.parity.outputs
        assert isinstance(result, RelativeError) and result.passed and result.max_rel < 1e-4, artifact.name
    saved = json.loads((exported / "manifest.json").read_text())
    assert saved["task"] == "regression"
    assert saved["artifacts"][0]["parity"]["outputs"][0]["kind"] == "relative"


def test_parity_judges_the_artifacts_with_the_tasks_compare_function(exported: Path) -> None:
    result = invoke("parity", exported, "--arch", f"{__name__}:make_regressor", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["passed"] and {r["candidate"] for r in payload["reports"]} == {"onnx", "torchscript"}
    assert {o["kind"] for r in payload["reports"] for o in r["outputs"]} == {"relative"}
    table = invoke("parity", exported, "--arch", f"{__name__}:make_regressor")
    assert table.exit_code == 0 and "max rel" in table.output, table.output


def test_a_candidate_off_by_one_percent_fails_by_relative_error(regression: Task) -> None:
    torch.manual_seed(0)
    reference = Model(make_regressor().eval())
    sets = [{"x": np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)}]
    kinds = {"output": "relative"}
    tolerance = ToleranceConfig.for_precision("fp32")
    close = compare_runners(reference, Scaled(reference, 1.0 + 1e-5), sets, tolerance, kinds=kinds)
    off = compare_runners(reference, Scaled(reference, 1.01), sets, tolerance, kinds=kinds)
    assert close.passed and not off.passed
    assert off.failures() == ["output: relative error 0.01 above rtol 0.001"]
    again = ParityReport.from_dict(json.loads(json.dumps(off.to_dict())))
    assert isinstance(again.outputs[0], RelativeError) and again.failures() == off.failures()


def test_publish_writes_no_labels_and_no_image_pipeline_for_it(exported: Path, tmp_path: Path) -> None:
    result = invoke("publish", exported, "--repo", tmp_path / "repo", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert not list((tmp_path / "repo").rglob("labels.txt"))
    assert any("takes no preprocessing" in note for note in payload.get("notes", [])), payload
    refused = invoke("publish", exported, "--repo", tmp_path / "other", "--labels", exported / "manifest.json")
    assert refused.exit_code != 0 and "has no class labels" in refused.output
