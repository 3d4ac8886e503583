"""The suite must catch a broken export: each breakage below, applied to a copy of the zoo's resnet18 export, makes
`modelship parity` exit non-zero with a failure naming the problem.

- wrong mean/std, swapped channel order: only end-to-end image parity can see these (the artifact is fine; the
  spec published beside it is not): random inputs pass, images fail, and the error says it is the preprocessing;
- a baked-in batch axis (a model.onnx exported without a dynamic batch): fails at batch 4, naming the fixed axis
  (and, if the manifest's sha256 was not updated, as a file changed since export);
- a corrupted weight (one initializer of model.onnx perturbed): every input set fails on the numbers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from .conftest import Exports
from .zoo import ZOO

pytestmark = pytest.mark.slow
RESNET18 = next(e for e in ZOO if e.name == "tv_resnet18")
PREPROCESSING = "the serving preprocessing (preprocess/ with manifest.json preprocess) does not reproduce the training"


@pytest.fixture(scope="module")
def resnet18(zoo_exports: Exports, pytestconfig: pytest.Config) -> Path:
    if pytestconfig.getoption("zoo") == "none":
        pytest.skip("--zoo none checks only your own checkpoints")
    return zoo_exports.get(RESNET18)[0]


def _broken_copy(folder: Path, tmp_path: Path, manifest_edit: Callable[[dict[str, Any]], None]) -> Path:
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest_edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return copy


def _onnx_artifact(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(a for a in manifest["artifacts"] if a["name"] == "onnx")


def _check(parity, name: str, folder: Path, photos: Path) -> dict[str, Any]:
    """`modelship parity` on the onnx artifact, random batches 1 and 4 and the photos: it must fail."""
    args = ("--artifact", "onnx", "--batch-sizes", "1,4", "--images", str(photos))
    code, payload = parity(f"breakage-{name}", folder, *args)
    assert code == 1 and payload["ok"] is False, f"{name} was not caught: {payload}"
    assert payload["error"].startswith("1 of 1 failed parity against eager: onnx")
    return payload


@pytest.mark.parametrize(
    "name, edit",
    [
        ("wrong-mean-std", {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}),
        ("bgr", {"channel_order": "BGR"}),
    ],
)
def test_wrong_preprocessing_spec(name: str, edit: dict, resnet18: Path, photos: Path, parity, tmp_path: Path) -> None:
    broken = _broken_copy(resnet18, tmp_path, lambda m: m["preprocess"].update(edit))
    payload = _check(parity, name, broken, photos)
    assert PREPROCESSING in payload["error"] and "model inputs differ by up to" in payload["error"], payload["error"]
    report = payload["reports"][0]
    assert {b["label"]: b["passed"] for b in report["per_batch"]} == {
        "batch 1": True,
        "batch 4": True,
        "image astronaut.png": False,
        f"5 images from {photos}": False,
    }
    assert any("needs atol" in reason for output in report["outputs"] for reason in output["failures"])


def _export_fixed_batch(folder: Path, path: Path) -> None:
    """model.onnx as an exporter without dynamic axes writes it: batch fixed to 1."""
    from modelship.checkpoint import LoadOptions, load_model

    manifest = json.loads((folder / "manifest.json").read_text())
    model = load_model(LoadOptions(checkpoint=Path(manifest["source"]["checkpoint"]), arch="resnet18")).model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))  # the legacy exporter's notice
        torch.onnx.export(
            model, (torch.randn(1, 3, 224, 224),), str(path), input_names=["x"], output_names=["output"], dynamo=False
        )


@pytest.mark.parametrize("sha_updated", [True, False], ids=["sha-updated", "sha-stale"])
def test_baked_in_batch_axis(sha_updated: bool, resnet18: Path, photos: Path, parity, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.onnx"
    _export_fixed_batch(resnet18, fixed)

    def swap(manifest: dict[str, Any]) -> None:
        if sha_updated:
            _onnx_artifact(manifest)["sha256"] = hashlib.sha256(fixed.read_bytes()).hexdigest()

    broken = _broken_copy(resnet18, tmp_path, swap)
    shutil.copy(fixed, broken / "model.onnx")
    report = _check(parity, f"baked-batch-{'sha-updated' if sha_updated else 'sha-stale'}", broken, photos)["reports"][
        0
    ]
    if sha_updated:
        assert report["error"].startswith("batch 4: model.onnx: x[0] is fixed to 1 in the graph, got 4")
        assert "the batch axis is baked in" in report["error"]
        assert [b["passed"] for b in report["per_batch"]] == [True]  # batch 1 ran and passed
    else:
        assert report["error"].startswith("model.onnx changed since export: sha256")


def test_corrupted_weight(resnet18: Path, photos: Path, parity, tmp_path: Path) -> None:
    model = onnx.load(str(resnet18 / "model.onnx"))
    weight = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    values = numpy_helper.to_array(weight).copy()
    values.flat[: values.size // 100] *= 1.5  # 1% of one tensor's weights drifted
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    corrupted = tmp_path / "corrupted.onnx"
    onnx.save(model, str(corrupted))

    def update_sha(manifest: dict[str, Any]) -> None:
        _onnx_artifact(manifest)["sha256"] = hashlib.sha256(corrupted.read_bytes()).hexdigest()

    broken = _broken_copy(resnet18, tmp_path, update_sha)
    shutil.copy(corrupted, broken / "model.onnx")
    payload = _check(parity, "corrupted-weight", broken, photos)
    assert PREPROCESSING not in payload["error"]
    report = payload["reports"][0]
    assert report["error"] is None and not any(b["passed"] for b in report["per_batch"])
    assert any("needs atol" in reason for output in report["outputs"] for reason in output["failures"])
