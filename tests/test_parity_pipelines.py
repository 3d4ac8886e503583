"""End-to-end image parity: training pipeline (torch transforms + eager) vs serving pipeline (preprocess/ + artifact).

The unit half checks `preprocess.to_torchvision` against `preprocess/` on real photos and that the pipelines catch
a wrong spec; the command half runs `modelship parity --images` on a small custom export (TinyNet, 64x64) whose
training preprocessing lives in its checkpoint's sidecar.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import skimage
import timm
import torch
import torchvision
from click.testing import CliRunner

from modelship.checkpoint import sidecar_path
from modelship.cli.main import main
from modelship.contract.errors import UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.parity import TorchRunner, compare_runners
from modelship.parity.image_inputs import (
    IMAGES,
    ImagePipeline,
    image_input,
    image_set,
    preprocessing_difference,
    serving_pipeline,
    serving_preprocess,
    training_pipeline,
    training_preprocess,
    training_transform,
)
from modelship.parity.runner_protocol import BaseRunner
from modelship.parity.tolerance import ToleranceConfig
from modelship.preprocess import PreprocessSpec, load_image, preprocess_images, to_torchvision, transform
from modelship.testing.realistic import make_realistic
from tests.checkpoint_factory import make_tinynet

PHOTOS = Path(skimage.__file__).parent / "data"
NAMES = ("astronaut.png", "coffee.png", "rocket.jpg", "chelsea.png")
SPEC = PreprocessSpec(resize=72, crop=64, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
IO = IOSpec(
    inputs=(TensorSpec("x", ("batch", 3, 64, 64), "float32"),), outputs=(TensorSpec("output", ("batch", 3), "float32"),)
)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    for name in NAMES:
        shutil.copy(PHOTOS / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def tinynet() -> torch.nn.Module:
    torch.manual_seed(0)
    return make_realistic(make_tinynet(), torch.randn(4, 3, 64, 64))


@pytest.mark.parametrize(
    "spec",
    [
        PreprocessSpec(),
        PreprocessSpec(resize=(200, 180), resize_mode="exact", crop=160, interpolation="bicubic"),
        PreprocessSpec(resize=72, crop=64, channel_order="BGR", layout="NHWC"),
        PreprocessSpec(resize=None, crop=128, scale=1.0, mean=(120.0, 110.0, 100.0), std=(60.0, 60.0, 60.0)),
        PreprocessSpec(resize=100, crop=96, interpolation="nearest", antialias=False, dtype="float16"),
    ],
    ids=["imagenet", "exact-bicubic", "bgr-nhwc", "scale1-nocrop-resize", "nearest-fp16"],
)
def test_to_torchvision_matches_preprocess(spec: PreprocessSpec) -> None:
    pipeline = to_torchvision(spec)
    for name in NAMES:
        image = load_image(PHOTOS / name)
        expected = transform(image, spec)
        actual = pipeline(image)
        assert actual.dtype == getattr(torch, spec.dtype) and tuple(actual.shape) == expected.shape
        np.testing.assert_allclose(actual.float().numpy(), expected.astype(np.float32), atol=1e-5, rtol=0)


def test_image_sets_carry_the_batch_size(images: Path, tinynet: torch.nn.Module) -> None:
    files = sorted(images.iterdir())
    sets = [image_set(files[:1]), image_set(files), {"x": np.zeros((2, 3, 64, 64), np.float32)}]
    eager = TorchRunner(tinynet, IO)
    reference = training_pipeline(eager, training_transform(tinynet, "x:y", SPEC, "c"), "x")
    candidate = serving_pipeline(TorchRunner(tinynet, IO, name="cand"), SPEC, image_input(IO), source="test spec")
    report = compare_runners(reference, candidate, sets, ToleranceConfig.for_precision("fp32"))
    assert report.passed, report.failures()
    assert report.batch_sizes == [1, len(NAMES), 2]
    assert report.outputs[0].max_abs < 1e-5
    assert candidate.name == "cand" and candidate.describe == "preprocess/ with test spec"


@pytest.mark.parametrize(
    "broken",
    [
        PreprocessSpec(resize=72, crop=64, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        PreprocessSpec(resize=72, crop=64, mean=SPEC.mean, std=SPEC.std, channel_order="BGR"),
        PreprocessSpec(resize=64, crop=64, mean=SPEC.mean, std=SPEC.std),
    ],
    ids=["wrong-mean-std", "bgr", "wrong-resize"],
)
def test_a_wrong_serving_spec_fails(broken: PreprocessSpec, images: Path, tinynet: torch.nn.Module) -> None:
    files = sorted(images.iterdir())
    source = training_transform(tinynet, "x:y", SPEC, "c")
    reference = training_pipeline(TorchRunner(tinynet, IO), source, "x")
    candidate = serving_pipeline(TorchRunner(tinynet, IO, name="cand"), broken, image_input(IO), source="broken")
    report = compare_runners(reference, candidate, [image_set(files)], ToleranceConfig.for_precision("fp32"))
    assert not report.passed and any("needs atol" in f for f in report.failures())


def test_preprocessing_difference(images: Path) -> None:
    files = sorted(images.iterdir())
    training = training_preprocess(training_transform(None, "x:y", SPEC, "c"))
    same = preprocessing_difference(training, serving_preprocess(SPEC, "float32"), files)
    assert same.matches and same.max_abs < 1e-5 and same.training_shape == [4, 3, 64, 64]
    bgr = PreprocessSpec(resize=72, crop=64, mean=SPEC.mean, std=SPEC.std, channel_order="BGR")
    swapped = preprocessing_difference(training, serving_preprocess(bgr, "float32"), files)
    assert not swapped.matches and swapped.max_abs > 0.1
    bigger = preprocessing_difference(training, serving_preprocess(PreprocessSpec(), "float32"), files)
    assert bigger.to_dict() == {
        "reference": "",
        "candidates": "",
        "matches": False,
        "max_abs": None,
        "mean_abs": None,
        "training_shape": [4, 3, 64, 64],
        "serving_shape": [4, 3, 224, 224],
    }


def test_non_image_sets_pass_through() -> None:
    seen = []

    class Echo(BaseRunner):
        name = "echo"

        def run(self, inputs):
            seen.append(inputs)
            return {"output": next(iter(inputs.values()))}

    pipeline = ImagePipeline(Echo(), lambda paths: np.full((len(paths), 1), 7.0), "x")
    plain = {"x": np.ones((2, 1))}
    assert pipeline.run(plain)["output"] is plain["x"]
    assert pipeline.run({IMAGES: np.array(["a", "b", "c"], dtype=object)})["output"].shape == (3, 1)
    assert list(seen[1]) == ["x"]


def test_training_transform_sources() -> None:
    tv = training_transform(None, "resnet18", None, "ckpt.pt")
    assert tv.source == "torchvision ResNet18_Weights.IMAGENET1K_V1.transforms()"
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    tm = training_transform(model, "timm/vit_tiny_patch16_224", None, "ckpt.pt")
    assert tm.source.startswith("timm create_transform(input_size=(3, 224, 224)")
    assert "mean=(0.5, 0.5, 0.5)" in tm.source
    own = training_transform(None, "resnet18", SPEC, "ckpt.pt")
    assert own.source == "the checkpoint's preprocess metadata (ckpt.pt)"
    assert isinstance(own.transform, torchvision.transforms.Compose)
    with pytest.raises(UsageError, match=r"ckpt\.pt: no training preprocessing .* 'pkg\.mod:Net'") as caught:
        training_transform(None, "pkg.mod:Net", None, "ckpt.pt")
    assert "ckpt.pt.json" in caught.value.hint


def test_image_input_needs_one_float_image_tensor() -> None:
    text = IOSpec(inputs=(TensorSpec("ids", ("batch", "sequence"), "int64"),), outputs=())
    with pytest.raises(UsageError, match=r"one float image input .* ids\['batch', 'sequence'\]:int64"):
        image_input(text)


def test_timm_training_transform_matches_the_exported_spec(images: Path) -> None:
    """timm's own create_transform and the spec from_timm derives agree on real photos (what the zoo relies on)."""
    from modelship.preprocess import from_timm

    model = timm.create_model("convnext_atto", pretrained=False)
    files = sorted(images.iterdir())
    reference = torch.stack(
        [training_transform(model, "timm/convnext_atto", None, "c").transform(load_image(f)) for f in files]
    )
    np.testing.assert_allclose(reference.numpy(), preprocess_images(files, from_timm(model)), atol=1e-5, rtol=0)


# -- the command, on a real export -------------------------------------------------------------------------------

TINY = "tests.checkpoint_factory:make_tinynet"


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory, tinynet: torch.nn.Module) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    checkpoint = root / "tiny.pt"
    torch.save(tinynet.state_dict(), checkpoint)
    sidecar_path(checkpoint).write_text(json.dumps({"preprocess": SPEC.to_dict()}))  # the code comes from --arch
    args = ["export", str(checkpoint), "--arch", TINY, "--onnx", "--exporter", "legacy", "--input", "x:batch,3,64,64"]
    args += ["--out", str(root / "exports"), "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return root / "exports" / "tiny"


def _parity(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["parity", *args, "--arch", TINY, "--batch-sizes", "1,2", "--json"])
    return result.exit_code, json.loads(result.stdout)


def _edit_manifest(folder: Path, edit) -> Path:
    copy = folder.parent / f"{folder.name}-edited-{edit.__name__}"
    shutil.copytree(folder, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.slow
def test_command_end_to_end_images(export_dir: Path, images: Path) -> None:
    code, payload = _parity(str(export_dir), "--images", str(images))
    assert code == 0, payload
    assert payload["inputs"] == ["batch 1", "batch 2", "image astronaut.png", f"4 images from {images}"]
    pipelines = payload["image_pipelines"]
    assert pipelines["reference"] == f"the checkpoint's preprocess metadata ({export_dir.parent.parent / 'tiny.pt'})"
    assert pipelines["candidates"] == "preprocess/ with manifest.json preprocess"
    assert pipelines["matches"] and pipelines["max_abs"] < 1e-5 and pipelines["serving_shape"] == [4, 3, 64, 64]
    assert payload["reports"][0]["batch_sizes"] == [1, 2, 1, 4]


@pytest.mark.slow
def test_command_catches_a_wrong_manifest_spec(export_dir: Path, images: Path) -> None:
    def wrong_std(manifest):
        manifest["preprocess"]["std"] = [0.229, 0.224, 0.225]

    code, payload = _parity(str(_edit_manifest(export_dir, wrong_std)), "--images", str(images))
    assert code == 1 and "1 of 1 failed parity" in payload["error"]
    assert (
        "the serving preprocessing (preprocess/ with manifest.json preprocess) does not reproduce the training "
        "transforms (the checkpoint's preprocess metadata" in payload["error"]
    )
    assert "model inputs differ by up to" in payload["diagnosis"]["onnx"]
    assert payload["image_pipelines"]["matches"] is False
    report = payload["reports"][0]
    assert [b["passed"] for b in report["per_batch"]] == [True, True, False, False]


@pytest.mark.slow
def test_command_names_the_missing_preprocessing(export_dir: Path, images: Path, tmp_path: Path) -> None:
    def no_preprocess(manifest):
        manifest["preprocess"] = None

    code, payload = _parity(str(_edit_manifest(export_dir, no_preprocess)), "--images", str(images))
    assert code == 2
    assert "has no preprocessing spec in its manifest.json" in payload["error"]

    bare = tmp_path / "bare.pt"
    shutil.copy(export_dir.parent.parent / "tiny.pt", bare)
    code, payload = _parity(str(export_dir), "--images", str(images), "--checkpoint", str(bare))
    assert payload["ok"] is False and "no training preprocessing" in payload["error"], payload


@pytest.mark.slow
def test_command_flags_an_artifact_changed_since_export(export_dir: Path) -> None:
    def other_sha(manifest):
        manifest["artifacts"][0]["sha256"] = "0" * 64

    code, payload = _parity(str(_edit_manifest(export_dir, other_sha)))
    assert code == 1
    assert "model.onnx changed since export: sha256" in payload["reports"][0]["error"]
