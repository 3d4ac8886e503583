"""Segmentation models the way a user exports them: a plain state_dict of a torchvision segmenter, recognised from
its weights, rebuilt without downloading anything (export-model runs with no network at all), exported with height
and width dynamic and judged as masks.

fp16 is not exported here: a randomly initialised MobileNetV3 backbone reaches activations of ~300 on random
inputs, where float16's resolution (0.25) moves the logits by ~1; that needs a trained segmenter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import skimage
import torch
from torchvision import models as tv_models

from modelship.checkpoint import LoadOptions, load_model
from modelship.checkpoint.arch import build_model
from modelship.checkpoint.families.registry import adapt_model
from modelship.checkpoint.families.torchvision_models import builder_takes
from modelship.contract.manifest import Manifest
from modelship.contract.preprocessing import PreprocessSpec
from modelship.parity import Tolerance, compare_function
from modelship.preprocess import preprocess_images
from modelship.testing.realistic import make_realistic
from tests.cli_contract import invoke

PHOTOS = [Path(skimage.__file__).parent / "data" / name for name in ("astronaut.png", "coffee.png", "chelsea.png")]
EXPORT_MODEL = (sys.executable, "-c", "from modelship.cli.main import export_model_main; export_model_main()")
CLASSES = 4


def offline(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """Run a command with no network at all (a new network namespace): any download fails at once."""
    return subprocess.run(
        ["unshare", "-n", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900, env=os.environ
    )


def segmenter_checkpoint(folder: Path, arch: str, **kwargs: object) -> Path:
    """A plain state_dict of `arch`, randomly initialised, its BatchNorm statistics calibrated on real photos
    (noise leaves near-constant channels whose tiny variances no fp16 model survives)."""
    torch.manual_seed(0)
    model = build_model(arch, {"num_classes": CLASSES, **kwargs}).train()
    model = make_realistic(model, torch.from_numpy(preprocess_images(PHOTOS, PreprocessSpec(resize=160, crop=160))))
    path = folder / f"{arch}.pt"
    torch.save(model.state_dict(), path)
    return path


@pytest.fixture(scope="module")
def lraspp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("segmentation")
    checkpoint = segmenter_checkpoint(root, "lraspp_mobilenet_v3_large")
    result = offline(*EXPORT_MODEL, checkpoint, "--out", root / "exports", "--json", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "exports" / "lraspp_mobilenet_v3_large", json.loads(result.stdout)


def test_a_plain_state_dict_is_recognised_and_exported_offline(lraspp: tuple[Path, dict]) -> None:
    folder, payload = lraspp
    manifest = Manifest.read(folder)
    assert manifest.source.arch == "lraspp_mobilenet_v3_large"
    assert manifest.source.arch_kwargs == {"num_classes": CLASSES}  # read off the head's weights
    assert manifest.task == "segmentation"
    assert [t.name for t in manifest.io.outputs] == ["out"]
    assert manifest.io.inputs[0].shape == ("batch", 3, "height", "width")
    assert manifest.io.outputs[0].shape == ("batch", CLASSES, "height", "width")
    assert manifest.preprocess is not None and (manifest.preprocess.resize, manifest.preprocess.crop) == (520, None)
    assert payload["ok"]


def test_every_artifact_is_judged_as_masks_at_two_sizes(lraspp: tuple[Path, dict]) -> None:
    folder, _ = lraspp
    manifest = Manifest.read(folder)
    assert {a.name for a in manifest.artifacts} == {"torchscript", "onnx"}
    for artifact in manifest.artifacts:
        report = artifact.parity
        assert report is not None and report.passed, (artifact.name, report and report.failures())
        (mask,) = report.outputs
        assert mask.kind == "mask" and mask.pixels > 0 and mask.disagreement <= 0.01 and mask.mean_iou >= 0.95
        sizes = {tuple(r.outputs[0].tensor.shape[2:]) for r in report.per_batch or []}
        assert len(sizes) >= 2, f"{artifact.name} verified at one image size only: {sizes}"


def test_the_auxiliary_head_is_read_from_the_weights_and_left_out_unless_asked(tmp_path: Path) -> None:
    checkpoint = segmenter_checkpoint(tmp_path, "deeplabv3_mobilenet_v3_large", aux_loss=True)
    loaded = load_model(LoadOptions(checkpoint))
    assert (loaded.arch, loaded.arch_kwargs) == ("deeplabv3_mobilenet_v3_large", {"aux_loss": True, "num_classes": 4})
    with torch.no_grad():
        assert list(loaded.model(torch.randn(1, 3, 64, 64))) == ["out"]
        kept = load_model(LoadOptions(checkpoint, keep_aux=True)).model
        assert list(kept(torch.randn(1, 3, 64, 64))) == ["out", "aux"]
    assert any("--keep-aux" in note for note in loaded.report.notes)


AUX_SEGMENTERS = [a for a in tv_models.list_models(module=tv_models.segmentation) if builder_takes(a, "aux_loss")]


@pytest.mark.parametrize("arch", AUX_SEGMENTERS)
def test_a_segmenter_trained_with_its_auxiliary_head_scripts_without_it(arch: str) -> None:
    """torchvision's segmentation recipe trains with aux_loss=True: the head left out must leave a model TorchScript
    accepts (a submodule set to None clashed with the class's `aux_classifier` constant)."""
    torch.manual_seed(0)
    model = adapt_model(build_model(arch, {"num_classes": 3, "aux_loss": True}).eval()).model
    scripted = torch.jit.script(model)
    image = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert list(scripted(image)) == ["out"]
        torch.testing.assert_close(scripted(image)["out"], model(image)["out"])


def test_masks_are_judged_by_pixels_and_iou() -> None:
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    mask = compare_function("mask")
    tolerance = Tolerance(atol=10.0, rtol=0.0, max_mask_disagreement=0.01, min_mask_iou=0.95)
    same = mask.compare("out", reference, reference.copy(), tolerance)
    assert same.passed and same.disagreement == 0 and same.mean_iou == 1.0
    flipped = reference.copy()
    flipped[:, :, :4, :] = flipped[:, ::-1, :4, :]  # a quarter of the rows: their classes change
    result = mask.compare("out", reference, flipped, tolerance)
    assert not result.passed and 0.1 < result.disagreement <= 0.25
    assert any("pixels change class" in f for f in result.failures)
    pooled = mask.aggregate([same, result], tolerance)
    assert pooled.pixels == same.pixels + result.pixels
    assert pooled.disagreement == pytest.approx(result.disagreement / 2)
    wrong = mask.compare("out", reference, reference[:, :2], tolerance)
    assert not wrong.passed and "shape" in wrong.failures[0]


def test_parity_on_photos_runs_torchvisions_segmentation_preset(lraspp: tuple[Path, dict], tmp_path: Path) -> None:
    """`modelship parity --images`: every photo its own size (no crop), preprocessed bit for bit as torchvision's
    SemanticSegmentation transforms do, and each artifact judged as masks on them."""
    folder, _ = lraspp
    photos = tmp_path / "photos"
    photos.mkdir()
    for path in PHOTOS:
        shutil.copy(path, photos / path.name)
    result = invoke("parity", folder, "--images", photos, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["inputs"][2:] == [f"image {path.name}" for path in sorted(PHOTOS)]
    pipelines = payload["image_pipelines"]
    assert pipelines["matches"] and pipelines["max_abs"] == 0.0 and "COCO_WITH_VOC_LABELS" in pipelines["reference"]
    assert pipelines["training_shape"][2] == 520  # the shorter side, as the preset resizes it


@pytest.mark.parametrize("artifact", ["onnx", "torchscript"])
def test_the_served_segmenter_passes_parity_on_photos(lraspp: tuple[Path, dict], tmp_path: Path, artifact: str) -> None:
    """Published as it is exported (height and width -1 in the config), served by a real Triton and judged as
    masks on photos of their own sizes against eager PyTorch, over gRPC."""
    from modelship.serve.publish import publish_export
    from modelship.serve.server import TritonServer

    folder, _ = lraspp
    photos = tmp_path / "photos"
    photos.mkdir()
    for path in PHOTOS:
        shutil.copy(path, photos / path.name)
    publish_export(folder, tmp_path / "repo", artifacts=[artifact])
    model = f"{folder.name}_{artifact}"
    with TritonServer(tmp_path / "repo") as server:
        result = invoke("parity", folder, "--artifact", artifact, "--images", photos, "--served", server.grpc_url,
                        "--served-model", model, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    reports = {r["candidate"]: r for r in json.loads(result.stdout)["reports"]}
    served = reports[f"triton:{model}"]
    assert served["passed"] and served["outputs"][0]["kind"] == "mask"
    assert served["batch_sizes"] == [1, 8, 1, 1, 1]  # two random batches, then each photo at its own size


def test_the_pipeline_answers_the_class_mask_of_each_photo(lraspp: tuple[Path, dict], tmp_path: Path) -> None:
    """`publish` (defaults) writes `_preprocess -> onnx -> _postprocess` as `<name>_pipeline`; `modelship infer`
    on it prints each class's share and writes overlays the photos' own size; the bare artifact, its scores made
    into masks by the client, answers the same; images of different sizes in one request fail that request."""
    from PIL import Image

    from modelship.contract.errors import ClientError
    from modelship.serve.server import TritonServer

    folder, _ = lraspp
    assert invoke("publish", folder, "--repo", tmp_path / "repo").exit_code == 0
    pipeline = f"{folder.name}_pipeline"
    with TritonServer(tmp_path / "repo") as server:
        served = invoke("infer", *PHOTOS, "--model", pipeline, "--url", server.grpc_url, "--save", tmp_path / "masks",
                        "--json")  # fmt: skip
        bare = invoke("infer", *PHOTOS, "--model", f"{folder.name}_onnx", "--url", server.http_url, "--json")
        shown = invoke("infer", PHOTOS[0], "--model", pipeline, "--url", server.http_url)
        with server.client() as client, pytest.raises(ClientError, match="share their size"):
            images = np.array([[PHOTOS[0].read_bytes()], [PHOTOS[1].read_bytes()]], dtype=object)
            client.infer(pipeline, {"IMAGE": images}, outputs=["MASK"])
        assert server.client().ready()
    assert served.exit_code == 0 and bare.exit_code == 0, served.output + bare.output
    answers = json.loads(served.stdout)["segmentations"]
    for answer, path in zip(answers, PHOTOS, strict=True):
        with Image.open(path) as photo, Image.open(answer["overlay"]) as tinted:
            assert answer["size"] == [photo.height, photo.width] and tinted.size == photo.size
        assert sum(entry["share"] for entry in answer["classes"]) == pytest.approx(1.0)
    assert [dict(a, overlay=None) for a in answers] == json.loads(bare.stdout)["segmentations"]
    assert shown.exit_code == 0 and shown.output.startswith(f"{PHOTOS[0]}  (512x512)"), shown.output


def test_a_class_mask_is_the_argmax_of_the_scores_resized_as_pytorch_resizes_them() -> None:
    """transformers' post_process_semantic_segmentation: bilinear (corners not aligned) straight to the photo's size,
    then the argmax; computed in numpy (no torch on the server) to the same pixels, at sizes up and down, in row
    chunks."""
    from modelship.drawing import palette
    from modelship.postprocess import MASK_ROWS, class_mask, class_shares

    rng = np.random.default_rng(0)
    for classes, low, size in (
        (5, (64, 64), (300, 451)),
        (21, (130, 97), (2 * MASK_ROWS + 3, 389)),
        (3, (10, 12), (7, 5)),
    ):
        scores = rng.standard_normal((classes, *low)).astype(np.float32)
        resized = torch.nn.functional.interpolate(torch.from_numpy(scores)[None], size=size, mode="bilinear")
        assert (class_mask(scores, size) == resized[0].argmax(0).numpy()).all()
    scores = np.zeros((3, 2, 2), dtype=np.float32)
    scores[1, 0, 0] = scores[2, 1, 1] = 1.0  # class 1 top-left, class 2 bottom-right, class 0 elsewhere
    mask = class_mask(scores, (4, 6))
    assert mask.dtype == np.uint8 and mask.shape == (4, 6)
    assert mask[0, 0] == 1 and mask[3, 5] == 2 and mask[0, 5] == mask[3, 0] == 0
    assert class_shares(np.array([[1, 0], [2, 0]]), 3).tolist() == [0.5, 0.25, 0.25]
    assert palette(3).tolist() == [[0, 0, 0], [128, 0, 0], [0, 128, 0]]  # PASCAL VOC's first colours
