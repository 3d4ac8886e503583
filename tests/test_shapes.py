"""A segmenter and a detector trained here in seconds on synthetic shapes (`modelship.testing.shapes`), the whole
way as a user takes them: `export-model CKPT --arch ... --fp16` (no network at all) passes parity in every
format, fp16 included; `publish` writes their `_pipeline`s; and the served pipelines find the shapes drawn in new
scenes of other sizes: the detector every shape, in the photo's pixels, with its label; the segmenter their pixels.
Random-weight models answer noise, which parity can compare but nobody can check against the picture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest

from modelship.contract.manifest import Manifest
from modelship.parity.box_compare import iou_matrix
from modelship.parity.onnx_graph import tensor_types
from modelship.testing.shapes import LABELS, Scene, draw_scene, train_detector, train_segmenter
from tests.cli_contract import invoke
from tests.test_segmentation import EXPORT_MODEL, offline

SIZES = ((160, 120), (200, 150), (128, 128))  # width, height: none of them the training size alone


@dataclass
class Served:
    exports: dict[str, Path]
    scenes: list[Scene]
    files: list[Path]
    blank: Path
    grpc_url: str
    http_url: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from PIL import Image

    from modelship.serve.server import TritonServer

    root = tmp_path_factory.mktemp("shapes")
    exports = {}
    for name, trained in (("shapes_seg", train_segmenter()), ("shapes_det", train_detector())):
        checkpoint = trained.save(root / f"{name}.pt")
        args = (checkpoint, "--arch", trained.arch, "--fp16", "--out", root / "exports", "--json")  # both formats
        result = offline(*EXPORT_MODEL, *args, cwd=root)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        exports[name] = root / "exports" / name
        published = invoke("publish", exports[name], "--repo", root / "repo")
        assert published.exit_code == 0, published.output
    rng = np.random.default_rng(7)
    scenes = [draw_scene(rng, width, height, shapes=3) for width, height in SIZES]
    files = []
    for index, scene in enumerate(scenes):
        files.append(root / f"scene{index}.png")
        scene.image.save(files[-1])
    blank = root / "blank.png"
    Image.new("RGB", (150, 110), (110, 110, 110)).save(blank)
    with TritonServer(root / "repo") as server:
        yield Served(exports, scenes, files, blank, server.grpc_url, server.http_url)


def test_trained_shapes_pass_parity_in_every_format_fp16_included(served: Served) -> None:
    for name, kind in (("shapes_seg", "mask"), ("shapes_det", "boxes")):
        manifest = Manifest.read(served.exports[name])
        assert {a.name for a in manifest.artifacts} == {"torchscript", "torchscript_fp16", "onnx", "onnx_fp16"}
        for artifact in manifest.artifacts:
            report = artifact.parity
            assert report is not None and report.passed, (name, artifact.name, report and report.failures())
            assert report.outputs[0].kind == kind


def test_the_fp16_onnx_detector_computes_in_float16_only_in_its_backbone(served: Served) -> None:
    """As its TorchScript fp16 variant does: the resize (sample positions past float16's resolution), heads, box
    decoding and NMS stay float32 (the resize in float16 left a box unmatched)."""
    proto = onnx.load(str(served.exports["shapes_det"] / "model.fp16.onnx"))
    weights = {w.name: w.data_type for w in proto.graph.initializer}
    convs = {n.name: weights[n.input[1]] for n in proto.graph.node if n.op_type == "Conv"}
    backbone = {name for name in convs if name.startswith("/detector/backbone/")}
    assert backbone and all(convs[name] == onnx.TensorProto.FLOAT16 for name in backbone), convs
    assert all(convs[name] == onnx.TensorProto.FLOAT for name in set(convs) - backbone), convs
    types = tensor_types(proto)
    resized = [
        n.output[0] for n in proto.graph.node if n.name.startswith("/detector/transform/") and n.op_type == "Mul"
    ]
    assert resized and onnx.TensorProto.FLOAT16 not in {types[name] for name in resized}


def test_the_served_detector_pipeline_finds_every_drawn_shape(served: Served, tmp_path: Path) -> None:
    result = invoke("infer", *served.files, served.blank, "--model", "shapes_det_pipeline", "--url", served.grpc_url,
                    "--save", tmp_path, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    *answers, blank = json.loads(result.stdout)["detections"]
    for scene, answer in zip(served.scenes, answers, strict=True):
        assert answer["size"] == [scene.image.height, scene.image.width]
        found = [d for d in answer["detections"] if d["score"] >= 0.5]
        overlap = iou_matrix(scene.boxes, np.array([d["box"] for d in found]).reshape(-1, 4))
        assert overlap.shape == (3, 3) and (overlap.max(axis=1) >= 0.7).all(), (scene.boxes, found)
        assert [found[j]["label"] for j in overlap.argmax(axis=1)] == [LABELS[k] for k in scene.labels]
        assert Path(answer["drawn"]).is_file()
    assert blank["detections"] == []  # nothing in the picture: zero detections, not an error


def test_the_served_segmenter_pipeline_finds_the_drawn_pixels(served: Served) -> None:
    from modelship.serve.client import TritonClient

    result = invoke("infer", *served.files, served.blank, "--model", "shapes_seg_pipeline", "--url",
                    served.http_url, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    *answers, blank = json.loads(result.stdout)["segmentations"]
    with TritonClient(served.grpc_url) as client:
        for scene, answer, path in zip(served.scenes, answers, served.files, strict=True):
            truth = np.bincount(scene.mask.ravel(), minlength=len(LABELS)) / scene.mask.size
            shares = {entry["label"]: entry["share"] for entry in answer["classes"]}
            assert np.allclose([shares.get(label, 0.0) for label in LABELS], truth, atol=0.02), (shares, truth)
            image = np.array([[path.read_bytes()]], dtype=object)
            mask = np.asarray(client.infer("shapes_seg_pipeline", {"IMAGE": image}, outputs=["MASK"])["MASK"])[0]
            for label in set(scene.labels.tolist()):
                drawn, answered = scene.mask == label, mask == label
                assert (drawn & answered).sum() / (drawn | answered).sum() >= 0.85, LABELS[label]
    assert [entry["label"] for entry in blank["classes"]] == ["background"]
