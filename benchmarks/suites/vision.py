"""Segmentation and detection pipelines: a real photo (JPEG) in, the class mask at the photo's size or the boxes in
its pixels out, through `<name>_pipeline`, against the same work in one process (decode + preprocess + the
artifact's runtime + the mask or the padded boxes, the same code), at batch 1 and concurrency 1 and 4, with where
a request's time goes.

- segmentation: lraspp_mobilenet_v3_large (4 classes), `_preprocess -> ONNX -> _postprocess`; in-process: ONNX
  Runtime, then `preprocess.postprocess.class_mask`;
- detection: ssdlite320_mobilenet_v3_large (7 classes), `_preprocess -> TorchScript` (the detection pipeline serves
  TorchScript: its ONNX graph takes one image); in-process: the TorchScript module.

Random weights made realistic (`modelship.testing.realistic`): the cost of a forward pass does not depend on what
the weights learned. The in-process side runs in the bench process, as the pipeline suite's does."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from modelship.bench.loadgen import run_load
from modelship.bench.measure import served
from modelship.bench.repeated import interleaved
from modelship.bench.report import Row
from modelship.bench.stats import LoadStats
from modelship.bench.suites.pipeline import photo_jpeg, statistics, where_time_goes
from modelship.bench.suites.serving import point_row
from modelship.bench.workspace import Plan, Workspace
from modelship.contract.preprocessing import PreprocessSpec
from modelship.preprocess import decode_image, transform
from modelship.serve.ensemble import IMAGE, PIPELINE_SUFFIX, POSTPROCESS_SUFFIX, PREPROCESS_SUFFIX
from modelship.serve.server import TritonServer

SUITE = "vision"
CONCURRENCIES = (1, 4)
PROTOCOL = "grpc"
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
    job = _in_process_job(export / manifest.artifact(choice.artifact).file, choice, spec, jpeg)
    expected = job()
    point_plan = replace(ws.plan, window_s=ws.plan.point_window_s)
    request = {IMAGE: np.array([[jpeg]], dtype=object)}
    rows = []
    with TritonServer(repo) as server:
        for concurrency in CONCURRENCIES:
            ws.log(f"vision: {pipeline} c{concurrency} vs in-process decode + preprocess + {choice.artifact}")
            baseline = functools.partial(_in_process, job, point_plan, concurrency)
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


def _in_process(job: Callable[[], np.ndarray], plan: Plan, concurrency: int) -> LoadStats:
    return run_load(lambda: job, concurrency=concurrency, duration_s=plan.window_s, max_requests=plan.max_requests,
                    warmup=2, warmup_s=plan.warmup_s, source="in-process")  # fmt: skip


def _in_process_job(path: Path, choice: VisionModel, spec: PreprocessSpec, jpeg: bytes) -> Callable[[], np.ndarray]:
    """The whole job in one process: decode, preprocess, run the artifact, then the mask at the photo's size (a
    segmenter) or the padded boxes (a detector)."""
    from modelship.preprocess.postprocess import class_mask

    if choice.artifact == "onnx":
        from modelship.parity import make_session

        session = make_session(path)
        name = session.get_inputs()[0].name

        def segment() -> np.ndarray:
            photo = decode_image(jpeg)
            scores = session.run(None, {name: transform(photo, spec)[None]})[0]
            return class_mask(scores[0], (photo.height, photo.width))[None]

        return segment
    import torch

    module = torch.jit.load(str(path)).eval()

    def detect() -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(transform(decode_image(jpeg), spec)[None]))["boxes"].numpy()

    return detect


def _export(ws: Workspace, choice: VisionModel) -> Path:
    """A realistic random-weight checkpoint of `choice`, exported with the project's loader and pipeline."""
    import torch
    from torchvision.models import detection, segmentation

    from modelship.checkpoint import LoadOptions, load_model
    from modelship.contract.manifest import Source
    from modelship.export.run import run_export
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
    source = Source(str(checkpoint), loaded.checkpoint_sha256, loaded.arch, loaded.arch_kwargs, loaded.arch_source)
    result = run_export(loaded.model, spec, source=source, metadata=loaded.metadata, preprocess=loaded.serving_spec())
    return result.folder


def _photos() -> list[Path]:
    """scikit-image's photos (a dev dependency), as the tests calibrate on."""
    import skimage

    return [Path(skimage.__file__).parent / "data" / name for name in ("astronaut.png", "coffee.png", "chelsea.png")]
