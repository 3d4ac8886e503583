"""Segmentation and detection pipelines: a real photo (JPEG) in, the class mask at the photo's size or the boxes in
its pixels out, through `<name>_pipeline`, against the same work in one process (decode + preprocess + the
artifact's runtime + the mask or the padded boxes, the same code), at batch 1 and concurrency 1 and 4, with where
a request's time goes.

- segmentation: lraspp_mobilenet_v3_large (4 classes), `_preprocess -> ONNX -> _postprocess`; in-process: ONNX
  Runtime, then `modelship.postprocess.class_mask`;
- detection: ssdlite320_mobilenet_v3_large (7 classes), `_preprocess -> TorchScript` (the detection pipeline serves
  TorchScript: its ONNX graph takes one image); in-process: the TorchScript module.

Random weights made realistic (`modelship.testing.realistic`): the cost of a forward pass does not depend on what
the weights learned. The in-process side runs in a process of its own (`measure.InProcess`): ONNX Runtime without
torch, or TorchScript in a process that has exported nothing (measured in the bench process, which has just
exported with torch, the detector's in-process side read slower than the served pipeline: 1.13)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from modelship.bench.measure import InProcess, served
from modelship.bench.repeated import interleaved
from modelship.bench.report import Row
from modelship.bench.suites.pipeline import photo_jpeg, statistics, where_time_goes
from modelship.bench.suites.serving import point_row
from modelship.bench.workspace import GRPC, Workspace
from modelship.contract.preprocessing import PreprocessSpec
from modelship.serve.ensemble import PIPELINE_SUFFIX
from modelship.serve.image_pipeline import IMAGE, POSTPROCESS_SUFFIX, PREPROCESS_SUFFIX
from modelship.serve.server import TritonServer

SUITE = "vision"
CONCURRENCIES = (1, 4)
PROTOCOL = GRPC
RATIO_OF = "served pipeline / in-process decode + preprocess + model"


@dataclass(frozen=True)
class VisionModel:
    """One pipeline to measure: the torchvision builder's name, its class count, the artifact its pipeline serves
    and the pipeline output the check compares."""

    arch: str
    classes: int
    artifact: str
    output: str


MODELS = (
    VisionModel("lraspp_mobilenet_v3_large", 4, "onnx", "MASK"),
    VisionModel("ssdlite320_mobilenet_v3_large", 7, "torchscript", "boxes"),
)


def run(ws: Workspace) -> list[Row]:
    rows = []
    jpeg = photo_jpeg()
    for choice in MODELS:
        export = _export(ws, choice)
        rows += _measure(ws, choice, export, jpeg)
    return rows


def _measure(ws: Workspace, choice: VisionModel, export: Path, jpeg: bytes) -> list[Row]:
    from modelship.contract.manifest import Manifest
    from modelship.serve.publish import publish_export

    manifest = Manifest.read(export)
    spec = manifest.preprocess
    assert spec is not None
    repo = ws.repo(f"{SUITE}-{choice.arch}")
    name = choice.arch.split("_")[0]
    publish_export(export, repo, name=name, artifacts=[choice.artifact], pipeline=choice.artifact)
    pipeline, model = name + PIPELINE_SUFFIX, f"{name}_{choice.artifact}"
    steps = (name + PREPROCESS_SUFFIX, model) + ((name + POSTPROCESS_SUFFIX,) if choice.output == "MASK" else ())
    point_plan = replace(ws.plan, window_s=ws.plan.point_window_s)
    request = {IMAGE: np.array([[jpeg]], dtype=object)}
    rows = []
    torchscript_output = choice.output if choice.artifact == "torchscript" else None
    artifact = export / manifest.artifact(choice.artifact).file
    with TritonServer(repo) as server, InProcess(artifact, torchscript_output=torchscript_output) as in_process:
        expected = in_process.image_pipeline(jpeg, spec, mask=choice.output == "MASK")
        for concurrency in CONCURRENCIES:
            ws.log(f"vision: {pipeline} c{concurrency} vs in-process decode + preprocess + {choice.artifact}")
            baseline = functools.partial(in_process.measure_images, point_plan, concurrency=concurrency)
            send = functools.partial(served, server, PROTOCOL, pipeline, request, {choice.output: expected},
                                     point_plan, concurrency=concurrency)  # fmt: skip
            before = statistics(server, (pipeline, *steps))
            point = interleaved(send, baseline, ws.plan.repetition)
            after = statistics(server, (pipeline, *steps))
            case = f"{name} {manifest.task} pipeline jpeg b1 c{concurrency} {PROTOCOL}"
            rows.append(point_row(case, point, ws.plan, RATIO_OF, suite=SUITE, unit="img/s"))
            if concurrency == 1:
                case = f"{name} {manifest.task} pipeline c1: where a request's time goes"
                rows.append(where_time_goes(SUITE, case, point.median_served, before, after, pipeline, steps))
    return rows


def _export(ws: Workspace, choice: VisionModel) -> Path:
    """A realistic random-weight checkpoint of `choice`, exported with the project's loader and pipeline."""
    import torch
    from torchvision.models import detection, segmentation

    from modelship.checkpoint import LoadOptions, load_model
    from modelship.export.loaded import export_loaded
    from modelship.export.spec import ExportSpec
    from modelship.preprocess import preprocess_images
    from modelship.testing.realistic import make_realistic, make_realistic_detector

    ws.log(f"vision: exporting {choice.arch}")
    torch.manual_seed(0)
    photos = _photos()
    if choice.output == "MASK":
        model = getattr(segmentation, choice.arch)(weights=None, weights_backbone=None, num_classes=choice.classes)
        model = make_realistic(model.train(), torch.from_numpy(preprocess_images(photos, PreprocessSpec(160, 160))))
    else:
        model = getattr(detection, choice.arch)(weights=None, weights_backbone=None, num_classes=choice.classes)
        unit = PreprocessSpec(resize=320, crop=320, mean=(0, 0, 0), std=(1, 1, 1))
        make_realistic_detector(model, torch.from_numpy(preprocess_images(photos, unit)))
    checkpoint = ws.root / f"{choice.arch}.pt"
    torch.save(model.state_dict(), checkpoint)
    loaded = load_model(LoadOptions(checkpoint))
    spec = ExportSpec(ws.root / "exports" / choice.arch, formats=(choice.artifact,), force=True)
    return export_loaded(loaded, spec).folder


def _photos() -> list[Path]:
    """scikit-image's photos (a dev dependency), as the tests calibrate on."""
    import skimage

    return [Path(skimage.__file__).parent / "data" / name for name in ("astronaut.png", "coffee.png", "chelsea.png")]
