"""`modelship parity` on a real export (squeezenet1_1, 10 classes, 64x64, every artifact): against the
checkpoint, against golden data, on real images, and failing cleanly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import skimage
import torch
import torchvision
from click.testing import CliRunner

from modelship.checkpoint import write_sidecar
from modelship.cli.main import main
from modelship.preprocess import PreprocessSpec
from modelship.testing.realistic import make_realistic

pytestmark = pytest.mark.slow
PHOTOS = Path(skimage.__file__).parent / "data"
TRAINING = PreprocessSpec(resize=73, crop=64)


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parity_cmd")
    torch.manual_seed(0)
    model = torchvision.models.squeezenet1_1(num_classes=10)
    make_realistic(model, torch.randn(4, 3, 64, 64))
    checkpoint = root / "sq.pt"
    torch.save(model.state_dict(), checkpoint)
    # the preprocessing it was trained with: --images compares it (in torch) with the serving spec (preprocess/)
    write_sidecar(checkpoint, "squeezenet1_1", {"num_classes": 10}, preprocess=TRAINING.to_dict())
    args = [
        "export", str(checkpoint), "--arch", "squeezenet1_1", "--arch-kwargs", '{"num_classes": 10}', "--onnx",
        "--torchscript", "--fp16", "--exporter", "legacy", "--input", "image:batch,3,64,64",
        "--out", str(root / "exports"), "--json",
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return root / "exports" / "sq"


def _parity(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["parity", *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_against_checkpoint_with_real_images(export_dir: Path, tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    for name in ("astronaut.png", "coffee.png", "rocket.jpg", "camera.png", "horse.png"):
        shutil.copy(PHOTOS / name, images / name)
    spec_file = tmp_path / "pre.json"
    TRAINING.write(spec_file)
    code, payload = _parity(str(export_dir), "--images", str(images), "--preprocess", str(spec_file))
    assert code == 0, payload
    assert payload["ok"] and payload["against"] == "checkpoint"
    assert payload["inputs"] == ["batch 1", "batch 8", "image astronaut.png", f"5 images from {images}"]
    reports = {r["candidate"]: r for r in payload["reports"]}
    assert set(reports) == {"torchscript", "torchscript_fp16", "onnx", "onnx_fp16"}
    assert reports["torchscript"]["outputs"][0]["max_abs"] == 0.0
    assert reports["onnx"]["outputs"][0]["max_abs"] < 1e-4
    assert reports["onnx_fp16"]["outputs"][0]["cosine"] > 0.999
    assert json.loads((export_dir / "parity.json").read_text())["passed"]


def test_against_golden_without_checkpoint(export_dir: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code, payload = _parity(str(export_dir), "--against", "golden", "--artifact", "onnx_fp16", "--report", str(report))
    assert code == 0 and [r["candidate"] for r in payload["reports"]] == ["onnx_fp16"]
    assert payload["reports"][0]["reference"] == "golden" and report.is_file()


def test_failure_exits_non_zero_with_the_reasons(export_dir: Path) -> None:
    code, payload = _parity(str(export_dir), "--against", "golden", "--artifact", "onnx", "--atol", "0", "--rtol", "0")
    assert code == 1 and payload["ok"] is False
    assert "1 of 1 failed parity" in payload["error"]
    failures = payload["reports"][0]["outputs"][0]["failures"]
    assert failures and "needs atol >=" in failures[0]
    human = CliRunner().invoke(main, ["parity", str(export_dir), "--against", "golden", "--atol", "0", "--rtol", "0"])
    assert human.exit_code == 1 and "needs atol >=" in human.output and "Traceback" not in human.output


def test_wrong_checkpoint_and_unknown_artifact_are_one_line_errors(export_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pt"
    torch.save(torchvision.models.squeezenet1_1(num_classes=10).state_dict(), other)
    code, payload = _parity(str(export_dir), "--checkpoint", str(other), "--artifact", "onnx")
    assert code == 1 and "checkpoint differs from the one exported" in payload["error"]
    code, payload = _parity(str(export_dir), "--artifact", "tensorrt")
    assert code == 1 and "no artifact 'tensorrt'" in payload["error"]
    code, payload = _parity(str(tmp_path))
    assert code == 1 and "no manifest.json" in payload["error"]
