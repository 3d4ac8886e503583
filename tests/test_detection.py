"""Detection models the way a user exports them: a plain state_dict of a torchvision detector, recognised from its
weights, rebuilt without downloading anything (export-model runs with no network at all), exported behind one
tensor interface (boxes, scores, labels padded per image, num) and judged as detections, boxes matched one to one.

The checkpoints are randomly initialised and made realistic (backbone BatchNorm calibrated on real photos, heads
drawn wide enough that scores differ): a default-initialised detector scores every class alike, every box ties
and their order is arbitrary, so there would be nothing to compare."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.models import detection

from modelship.contract.manifest import Manifest
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.parity import Tolerance, compare_function
from modelship.preprocess import preprocess_images
from modelship.testing.realistic import make_realistic_detector
from tests.test_segmentation import EXPORT_MODEL, PHOTOS, offline

CLASSES = 7
# fasterrcnn_mobilenet_v3_large_320_fpn has the very weights of fasterrcnn_mobilenet_v3_large_fpn (they differ in
# the size they resize to): its state_dict needs --arch (test_twin_detectors_are_refused_by_name). A random RPN
# scores its proposals almost alike, so the 150 it keeps by default flip on float noise: keep them all.
RPN_ALL = '{"num_classes": 7, "rpn_pre_nms_top_n_test": 1000, "rpn_post_nms_top_n_test": 1000}'
FAST = {
    "ssdlite320_mobilenet_v3_large": (),
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        *("--arch", "fasterrcnn_mobilenet_v3_large_320_fpn"),
        *("--arch-kwargs", RPN_ALL),
    ),
}


def detector_checkpoint(folder: Path, arch: str) -> Path:
    torch.manual_seed(0)
    model = getattr(detection, arch)(weights=None, weights_backbone=None, num_classes=CLASSES)
    photos = preprocess_images(PHOTOS, PreprocessSpec(resize=320, crop=320, mean=(0, 0, 0), std=(1, 1, 1)))
    make_realistic_detector(model, torch.from_numpy(photos))
    path = folder / f"{arch}.pt"
    torch.save(model.state_dict(), path)
    return path


def export_detector(root: Path, arch: str) -> tuple[Path, dict]:
    """`export-model CHECKPOINT` with FAST's flags, offline: the export folder (its checkpoint two levels up, as
    `detector_checkpoint` names it) and the JSON answer."""
    checkpoint = detector_checkpoint(root, arch)
    result = offline(*EXPORT_MODEL, checkpoint, "--out", root / "exports", *FAST[arch], "--json", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root / "exports" / arch, json.loads(result.stdout)


@pytest.fixture(scope="module", params=list(FAST))
def exported(request: pytest.FixtureRequest, detector_exports: Callable[[str], tuple[Path, dict]]) -> tuple[Path, dict]:
    return detector_exports(request.param)


def test_a_plain_state_dict_exports_offline_behind_one_tensor_interface(exported: tuple[Path, dict]) -> None:
    folder, payload = exported
    manifest = Manifest.read(folder)
    assert payload["ok"] and manifest.task == "detection"
    assert manifest.source.arch == folder.name and manifest.source.arch_kwargs["num_classes"] == CLASSES
    assert manifest.io.inputs[0].shape == ("batch", 3, "height", "width")
    assert [(t.name, t.shape[0], t.dtype) for t in manifest.io.outputs] == [
        ("boxes", "batch", "float32"),
        ("scores", "batch", "float32"),
        ("labels", "batch", "int64"),
        ("num", "batch", "int64"),
    ]
    assert manifest.preprocess is not None and manifest.preprocess.std == (1.0, 1.0, 1.0)  # the detector normalises
    onnx = next(a for a in manifest.artifacts if a.name == "onnx")
    assert onnx.details.exporter == "legacy" and onnx.io.inputs[0].shape == (1, 3, "height", "width")


def test_every_artifact_is_judged_by_matching_many_boxes(exported: tuple[Path, dict]) -> None:
    folder, _ = exported
    for artifact in Manifest.read(folder).artifacts:
        report = artifact.parity
        assert report is not None and report.passed, (artifact.name, report and report.failures())
        (boxes,) = report.outputs  # scores, labels and num are judged with the boxes
        assert boxes.kind == "boxes" and boxes.matched >= max(500, 0.99 * boxes.reference_boxes)
        sizes = {r.outputs[0].images for r in report.per_batch or []}
        assert sizes == {1, 7}, sizes


def test_the_detection_count_follows_each_image_in_every_format(tmp_path: Path) -> None:
    """`num` is counted from the answer in every artifact: an image with nothing above the score threshold answers
    0 and a busy one its own count (a count built from Python ints became a constant of the ONNX graph)."""
    import onnxruntime as ort

    checkpoint = detector_checkpoint(tmp_path, "ssdlite320_mobilenet_v3_large")
    kwargs = json.dumps({"num_classes": CLASSES, "score_thresh": 0.35})
    args = ("--arch", "ssdlite320_mobilenet_v3_large", "--arch-kwargs", kwargs, "--out", tmp_path / "exports")
    result = offline(*EXPORT_MODEL, checkpoint, *args, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    folder = tmp_path / "exports" / "ssdlite320_mobilenet_v3_large"
    images = [np.zeros((1, 3, 320, 320), np.float32), preprocess_images(PHOTOS[:1], PreprocessSpec(resize=None,
              crop=None, mean=(0, 0, 0), std=(1, 1, 1)))]  # fmt: skip
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    scripted = torch.jit.load(str(folder / "model.pt"))
    counts = []
    for image in images:
        onnx = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"image": image}), strict=True))
        script = scripted(torch.from_numpy(image))
        assert onnx["num"].tolist() == [int((onnx["labels"] >= 0).sum())] == script["num"].tolist()
        counts.append(int(onnx["num"][0]))
    assert counts[0] == 0 and counts[1] > 0, counts


def test_an_fp16_detector_that_moves_its_boxes_fails_naming_them(tmp_path: Path) -> None:
    """ONNX fp16 of a detector converts (the converter's Casts around NonMaxSuppression inside an If body are moved
    into it) and is judged as detections: this random-weight SSDlite's boxes move in fp16, and the one-line error
    says by how much; nothing is written."""
    checkpoint = detector_checkpoint(tmp_path, "ssdlite320_mobilenet_v3_large")
    result = offline(
        *EXPORT_MODEL, checkpoint, "--onnx", "--fp16", "--out", tmp_path / "exports", "--json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    error = json.loads(result.stdout)["error"]
    assert "onnx_fp16" in error and "matched boxes move by up to" in error and "\n" not in error, error
    assert not (tmp_path / "exports").exists() or not any((tmp_path / "exports").iterdir())


def test_twin_detectors_are_refused_by_name(tmp_path: Path) -> None:
    from tests.cli_contract import invoke

    checkpoint = detector_checkpoint(tmp_path, "fasterrcnn_mobilenet_v3_large_320_fpn")
    result = invoke("export", checkpoint, "--out", tmp_path / "out")
    assert result.exit_code != 0 and "match 2 architectures" in result.output
    assert "--arch fasterrcnn_mobilenet_v3_large_320_fpn" in result.output and not (tmp_path / "out").exists()


def _padded(boxes: list[list[float]], scores: list[float], labels: list[int], rows: int = 6) -> Tensors:
    out = {
        "boxes": np.zeros((1, rows, 4), np.float32),
        "scores": np.zeros((1, rows), np.float32),
        "labels": np.full((1, rows), -1, np.int64),
        "num": np.array([len(boxes)], np.int64),
    }
    count = len(boxes)
    out["boxes"][0, :count], out["scores"][0, :count], out["labels"][0, :count] = boxes, scores, labels
    return out


def test_detections_are_matched_one_to_one_and_judged_near_the_score_edge() -> None:
    compare = compare_function("detections").compare
    tolerance = Tolerance(atol=0, rtol=0, box_atol=0.5, score_atol=1e-3, score_margin=0.05)
    boxes = [[0, 0, 10, 10], [20, 20, 40, 40], [5, 30, 25, 60], [50, 50, 60, 70]]
    reference = _padded(boxes, [0.9, 0.8, 0.5, 0.04], [1, 2, 1, 3])
    reordered = _padded([boxes[i] for i in (2, 0, 1, 3)], [0.5, 0.9, 0.8, 0.04], [1, 1, 2, 3])
    same = compare("boxes", reference, reordered, tolerance)
    assert same.passed and same.matched == 4 and same.max_box_diff == 0
    moved = _padded([[0, 0, 10, 12], *boxes[1:]], [0.9, 0.8, 0.5, 0.04], [1, 2, 1, 3])
    result = compare("boxes", reference, moved, tolerance)
    assert not result.passed and "move by up to 2 px" in result.failures[0]
    edge = compare("boxes", reference, _padded(boxes[:3], [0.9, 0.8, 0.5], [1, 2, 1]), tolerance)
    assert edge.passed and edge.tolerated == 1  # the 0.04 box sits at the threshold edge
    lost = compare("boxes", reference, _padded(boxes[1:], [0.8, 0.5, 0.04], [2, 1, 3]), tolerance)
    assert not lost.passed and "1 box unmatched above the score edge (scores 0.900)" in lost.failures[0]
    relabelled = compare("boxes", reference, _padded(boxes, [0.9, 0.8, 0.5, 0.04], [1, 2, 4, 3]), tolerance)
    assert not relabelled.passed and relabelled.matched == 3
    missing = compare("boxes", reference, {k: v for k, v in reference.items() if k != "num"}, tolerance)
    assert not missing.passed and "no num output" in missing.failures[0]


@pytest.mark.parametrize("exported", ["ssdlite320_mobilenet_v3_large"], indirect=True)
def test_the_pipeline_answers_boxes_in_the_photos_pixels(exported: tuple[Path, dict], tmp_path: Path) -> None:
    """`publish` (defaults) serves the TorchScript detector behind `<name>_pipeline` (the ONNX graph takes one
    image: it is published without a batch axis); `modelship infer` on the pipeline and on both bare artifacts
    answers the photos' detections in their own pixels, draws them with --save, and parity over gRPC passes for
    both served artifacts."""
    from PIL import Image

    from modelship.serve.server import TritonServer
    from tests.cli_contract import invoke

    folder, _ = exported
    published = invoke("publish", folder, "--repo", tmp_path / "repo", "--json")
    assert published.exit_code == 0, published.output
    models = {m["name"] for m in json.loads(published.stdout)["models"]}
    name = folder.name
    assert models == {f"{name}_{suffix}" for suffix in ("torchscript", "onnx", "preprocess", "pipeline")}
    with TritonServer(tmp_path / "repo") as server:
        ask = ("--url", server.grpc_url, "--min-score", "0", "--json")
        answers = {
            model: invoke("infer", *PHOTOS, "--model", model, *ask, *(("--save", tmp_path / "drawn") * draw))
            for model, draw in ((f"{name}_pipeline", True), (f"{name}_torchscript", False), (f"{name}_onnx", False))
        }
        shown = invoke("infer", PHOTOS[0], "--model", f"{name}_pipeline", "--url", server.http_url)
        parity = [
            invoke("parity", folder, "--artifact", a, "--served", server.grpc_url, "--json")
            for a in ("onnx", "torchscript")
        ]
    assert all(r.exit_code == 0 for r in answers.values()), {m: r.output[:300] for m, r in answers.items()}
    found = {model: json.loads(r.stdout)["detections"] for model, r in answers.items()}
    pipeline = found[f"{name}_pipeline"]
    assert [dict(a, drawn=None) for a in pipeline] == found[f"{name}_torchscript"]  # the same model, same pixels
    for answer, onnx, path in zip(pipeline, found[f"{name}_onnx"], PHOTOS, strict=True):
        with Image.open(path) as photo, Image.open(answer["drawn"]) as drawn:
            assert answer["size"] == [photo.height, photo.width] and drawn.size == photo.size
        assert len(answer["detections"]) == 300 and len(onnx["detections"]) == 300
        for box in (d["box"] for d in answer["detections"]):
            assert 0 <= box[0] <= box[2] <= photo.width and 0 <= box[1] <= box[3] <= photo.height
        best, other = answer["detections"][0], onnx["detections"][0]
        assert best["index"] == other["index"] and np.allclose(best["box"], other["box"], atol=2.0)
    assert shown.exit_code == 0 and shown.output.startswith(f"{PHOTOS[0]}  (512x512): "), shown.output
    for result in parity:
        assert result.exit_code == 0, result.output[-2000:]
        (served,) = [r for r in json.loads(result.stdout)["reports"] if r["candidate"].startswith("triton:")]
        assert served["passed"] and served["outputs"][0]["kind"] == "boxes" and served["outputs"][0]["matched"] > 0


def test_matched_boxes_masks_and_keypoints_are_compared_too() -> None:
    compare = compare_function("detections").compare
    tolerance = Tolerance(atol=0, rtol=0, box_atol=2.0, score_atol=1e-3, score_margin=0.01, min_mask_iou=0.9)
    reference = _padded([[0, 0, 8, 8], [8, 8, 16, 16]], [0.9, 0.8], [1, 1], rows=3)
    masks = np.zeros((1, 3, 1, 16, 16), np.float32)
    masks[0, 0, 0, :8, :8] = masks[0, 1, 0, 8:, 8:] = 0.9
    points = np.zeros((1, 3, 17, 3), np.float32)
    points[0, :2, :, :2] = 4.0
    reference |= {"masks": masks, "keypoints": points}
    same = compare("boxes", reference, {k: v.copy() for k, v in reference.items()}, tolerance)
    assert same.passed and same.mask_iou == 1.0 and same.keypoint_diff == 0.0
    shrunk = {k: v.copy() for k, v in reference.items()}
    shrunk["masks"][0, 1, 0, 8:12] = 0.0  # half of the second instance's mask is gone
    shrunk["keypoints"][0, 0, 3, 0] = 9.0  # one keypoint moves by 5 px
    result = compare("boxes", reference, shrunk, tolerance)
    assert not result.passed and result.mask_iou == pytest.approx(0.5) and result.keypoint_diff == 5.0
    assert any("masks overlap down to IoU 0.5000" in f for f in result.failures)
    assert any("keypoints move by up to 5 px" in f for f in result.failures)
    lost = compare("boxes", reference, {k: v for k, v in reference.items() if k != "masks"}, tolerance)
    assert not lost.passed and "no masks output" in lost.failures[0]


def test_the_detector_resize_is_eagers_in_torchscript_and_onnx(tmp_path: Path) -> None:
    """torchvision scripted or traced computes the resize scale in float32: 168x224 became 799x1066 where eager
    gives 800x1066. The wrapper's resize equals eager torchvision's bit for bit in eager and TorchScript, and in
    ONNX samples where eager samples (ONNX Runtime's own Resize was up to 3e-5 off on 0..1 pixels, 1e-4 once
    normalised), at sizes where the float32 scale lands short."""
    import onnxruntime as ort
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    from modelship.checkpoint.families.torchvision_resize import ExactResizeTransform

    class Tensors(torch.nn.Module):
        def __init__(self, transform: torch.nn.Module) -> None:
            super().__init__()
            self.transform = transform

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.transform([image[0]])[0].tensors

    settings = (800, 1333, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    torchvision_own = GeneralizedRCNNTransform(*settings).eval()
    exact = GeneralizedRCNNTransform(*settings).eval()
    exact.__class__ = ExactResizeTransform
    scripted = torch.jit.script(exact)
    assert torch.jit.script(torchvision_own)([torch.rand(3, 168, 224)])[0].image_sizes == [(799, 1066)]  # the defect
    path = tmp_path / "resize.onnx"
    torch.onnx.export(Tensors(exact).eval(), (torch.rand(1, 3, 96, 128),), str(path), input_names=["image"],
                      opset_version=17, dynamo=False, dynamic_axes={"image": {2: "h", 3: "w"}})  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for height, width in ((168, 224), (224, 168), (96, 220), (120, 333)):
        image = torch.rand(3, height, width)
        reference = torchvision_own([image])[0]
        for candidate in (exact([image])[0], scripted([image])[0]):
            assert candidate.image_sizes == reference.image_sizes and torch.equal(candidate.tensors, reference.tensors)
        onnx = session.run(None, {"image": image[None].numpy()})[0]
        assert onnx.shape == tuple(reference.tensors.shape) and np.abs(onnx - reference.tensors.numpy()).max() < 1e-6


def test_boxes_clipped_to_lines_are_matched() -> None:
    from modelship.parity.box_compare import match_boxes

    lines = np.array([[10.0, 50.0, 40.0, 50.0], [0.0, 5.0, 0.0, 30.0]])  # zero height, zero width
    moved = lines + np.array([0.3, 0.0, 0.3, 0.0])
    assert match_boxes(lines, np.array([1, 2]), moved, np.array([1, 2])) == [(0, 0), (1, 1)]
    assert match_boxes(lines, np.array([1, 2]), lines + 40.0, np.array([1, 2])) == []
