"""`modelship infer IMAGE... --model NAME`: ask a served model about images, over HTTP or gRPC: the top-k classes
of a classifier, each class's share of the photo for a segmenter (modelship.cli.segment), each detection for a
detector (modelship.cli.detect); `--text` asks a text pipeline (modelship.cli.text_infer).

The task, preprocessing spec and labels come from the model itself (config parameters written by `modelship
publish`), so the client needs nothing but the server's address: no torch, no export folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
import numpy as np

from modelship.cli.detect import Detections, detect
from modelship.cli.main import GuardedCommand, emit_json, json_option
from modelship.cli.numbers import MAX_BATCH, count, fraction
from modelship.cli.segment import Segmentation, segment
from modelship.cli.server_flags import protocol_option, url_option
from modelship.cli.text_infer import ask_texts, read_texts, show_text_answers, takes_texts
from modelship.contract.errors import ClientError, UsageError
from modelship.preprocess.image import preprocess_images
from modelship.serve.client import TritonClient
from modelship.serve.model_info import ModelInfo, TensorInfo
from modelship.serve.protocols import WireProtocol
from modelship.tasks import get_task
from modelship.tasks.detection import DETECTION
from modelship.tasks.registry import Answer
from modelship.tasks.segmentation import SEGMENTATION


def classify(client: TritonClient, model: str, images: list[Path], *, batch: int = 8, k: int = 5) -> list[dict]:
    """Send `images` in batches, return top-k per image: as encoded bytes to a pipeline model (its server decodes
    and preprocesses), else preprocessed with the model's published spec."""
    info = client.model(model)
    answer = _answer(info)
    tensor = image_input(info)
    size = min(batch, info.max_batch_size) if info.max_batch_size else 1
    output = info.outputs[0].name
    chunks = [images[start : start + size] for start in range(0, len(images), size)]
    if tensor.datatype == "BYTES":
        requests = [{tensor.name: np.array([[_read(p)] for p in chunk], dtype=object)} for chunk in chunks]
    else:
        requests = [{tensor.name: _pixels(info, tensor, chunk)} for chunk in chunks]
    results = client.infer_many(model, requests, outputs=[output])
    scores = np.concatenate([np.atleast_2d(r[output]).astype(np.float32) for r in results])
    answers = answer(scores, info.labels, k)
    return [
        {"image": str(path), "top_k": [p.to_dict() for p in best]} for path, best in zip(images, answers, strict=True)
    ]


def _answer(info: ModelInfo) -> Answer:
    """How the served model's task shows an answer (its export's task, published in the config; classification
    for models published before tasks were recorded)."""
    task = get_task(info.task)
    if task.answer is None:
        raise ClientError(f"model {info.name!r} is a {task.name} model; `infer` shows no {task.name} answers yet")
    return task.answer


def _pixels(info: ModelInfo, tensor: TensorInfo, images: list[Path]) -> np.ndarray:
    spec = info.preprocess
    if spec is None:
        raise ClientError(
            f"model {info.name!r} publishes no preprocessing spec", hint="publish it with `modelship publish`"
        )
    pixels = preprocess_images(images, spec)
    if not info.max_batch_size and len(tensor.shape) == pixels.ndim - 1:
        pixels = pixels[0]  # a model without a batch axis takes one image
    return pixels.astype(tensor.dtype, copy=False)


def _read(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None


def image_input(info: ModelInfo) -> TensorInfo:
    """The model's one input: an image tensor, or encoded bytes for a pipeline."""
    if len(info.inputs) != 1:
        raise ClientError(
            f"model {info.name!r} takes {len(info.inputs)} inputs; `infer` serves single-image-input models"
        )
    return info.inputs[0]


@click.command("infer", cls=GuardedCommand)
@click.argument("images", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--model", required=True, help="Served model name, e.g. resnet18_onnx.")
@click.option("--text", "texts", multiple=True, help="A text for a text model's NAME_pipeline; repeatable.")
@click.option(
    "--texts",
    "texts_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file of texts, one per line (with or instead of --text).",
)
@url_option("--url", "url", "Server address")
@protocol_option("--url", default=None)
@click.option(
    "--top-k", "k", type=count(1_000_000), default=5, show_default=True, help="How many classes to show per image."
)
@click.option(
    "--batch",
    type=count(MAX_BATCH),
    default=8,
    show_default=True,
    help="Images per request (capped by max_batch_size).",
)
@click.option(
    "--save",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Segmentation: write each photo tinted by class to DIR/<stem>_mask.png; detection: with its boxes drawn "
    "to DIR/<stem>_boxes.png.",
)
@click.option(
    "--min-score",
    type=fraction(),
    default=0.5,
    show_default=True,
    help="Detection: show detections scoring at least this.",
)
@json_option
def infer_command(
    images: tuple[Path, ...],
    model: str,
    texts: tuple[str, ...],
    texts_file: Path | None,
    url: str | None,
    protocol: WireProtocol | None,
    k: int,
    batch: int,
    save: Path | None,
    min_score: float,
    as_json: bool,
) -> None:
    """Ask a model served by Triton about IMAGE files: a classifier's top-k classes with labels, a segmenter's
    share of each photo per class (with --save, the photo tinted by class), a detector's boxes with label and score
    (with --save, drawn on the photo). With --text/--texts, ask a text model's NAME_pipeline: a text classifier's
    top-k classes, a token classifier's label per token, or a sentence embedding (and each pair's similarity).

    Images are preprocessed exactly as at export (the spec is read from the served model's config) and sent as
    binary tensors with tritonclient; a NAME_pipeline model gets the encoded files as they are (its server
    decodes and preprocesses them, and a segmenter's answers the class mask at the photo's size). Requests are
    sent concurrently.
    """
    asked = read_texts(texts, texts_file)
    if bool(asked) == bool(images):
        raise UsageError("give image files, or texts with --text/--texts (not both)")
    with TritonClient(url, protocol) as client:
        info = client.model(model)
        if asked:
            answers = ask_texts(client, info, asked, k)
            if as_json:
                emit_json({"ok": True, "model": model, "url": client.url, **answers.to_dict()})
                return
            show_text_answers(answers, click.echo)
            return
        if takes_texts(info):
            raise UsageError(
                f"model {model!r} is a {info.task} model: it takes texts, not image files",
                hint="pass the texts with --text TEXT (repeatable) or --texts FILE (one per line)",
            )
        per_photo = _per_photo(client, info, list(images), save, min_score)
        if per_photo is not None:
            key, photo_answers, show = per_photo
            if as_json:
                emit_json({"ok": True, "model": model, "url": client.url, key: [a.to_dict() for a in photo_answers]})
                return
            show(photo_answers)
            return
        if save is not None:
            raise UsageError(f"--save: model {model!r} is a {info.task} model; --save draws segmentations and boxes")
        predictions = classify(client, model, list(images), batch=batch, k=k)
        if as_json:
            emit_json({"ok": True, "model": model, "url": client.url, "predictions": predictions})
            return
    for prediction in predictions:
        click.echo(prediction["image"])
        for rank, entry in enumerate(prediction["top_k"], 1):
            click.echo(f"  {rank}. {entry['label']:<24} {entry['probability']:7.2%}  (score {entry['score']:.4f})")


def _per_photo(
    client: TritonClient, info: ModelInfo, images: list[Path], save: Path | None, min_score: float
) -> tuple[str, list, Callable[[list], None]] | None:
    """A segmenter's or a detector's answers (one request per photo), their `--json` key and how they print; None
    for a model of another task."""
    if info.task == SEGMENTATION.name:
        return "segmentations", segment(client, info, image_input(info), images, save), _show_segmentations
    if info.task == DETECTION.name:
        return "detections", detect(client, info, image_input(info), images, save, min_score), _show_detections
    return None


def _show_segmentations(segmented: list[Segmentation]) -> None:
    for answer in segmented:
        click.echo(f"{answer.image}  ({answer.width}x{answer.height})")
        for entry in answer.classes:
            click.echo(f"  {entry.label:<24} {entry.share:7.2%}")
        if answer.overlay:
            click.echo(f"  overlay: {answer.overlay}")


def _show_detections(found: list[Detections]) -> None:
    for answer in found:
        click.echo(f"{answer.image}  ({answer.width}x{answer.height}): {len(answer.detections)} detections")
        for entry in answer.detections:
            x1, y1, x2, y2 = entry.box
            click.echo(f"  {entry.label:<16} {entry.score:6.3f}  [{x1:.0f}, {y1:.0f}, {x2:.0f}, {y2:.0f}]")
        if answer.drawn:
            click.echo(f"  drawn: {answer.drawn}")
