"""`modelship infer IMAGE... --model NAME`: classify images with a served model, over HTTP or gRPC.

The preprocessing spec and labels come from the model itself (config parameters written by `modelship publish`),
so the client needs nothing but the server's address: no torch, no export folder.
"""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from modelship.cli.main import GuardedCommand, emit_json, json_option
from modelship.cli.server_flags import protocol_option, url_option
from modelship.contract.errors import ClientError, UsageError
from modelship.preprocess.image import preprocess_images
from modelship.serve.client import TritonClient
from modelship.serve.model_info import ModelInfo, TensorInfo
from modelship.tasks import DEFAULT_TASK, get_task
from modelship.tasks.registry import Answer


def classify(client: TritonClient, model: str, images: list[Path], *, batch: int = 8, k: int = 5) -> list[dict]:
    """Send `images` in batches, return top-k per image: as encoded bytes to a pipeline model (its server decodes
    and preprocesses), else preprocessed with the model's published spec."""
    info = client.model(model)
    answer = _answer(info)
    tensor = _image_input(info)
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
    task = get_task(info.export_info.task if info.export_info else DEFAULT_TASK)
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


def _image_input(info: ModelInfo) -> TensorInfo:
    if len(info.inputs) != 1:
        raise ClientError(
            f"model {info.name!r} takes {len(info.inputs)} inputs; `infer` classifies single-image-input models"
        )
    return info.inputs[0]


@click.command("infer", cls=GuardedCommand)
@click.argument("images", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--model", required=True, help="Served model name, e.g. resnet18_onnx.")
@url_option("--url", "url", "Server address")
@protocol_option("--url", default=None)
@click.option("--top-k", "k", type=int, default=5, show_default=True, help="How many classes to show per image.")
@click.option("--batch", type=int, default=8, show_default=True, help="Images per request (capped by max_batch_size).")
@json_option
def infer_command(
    images: tuple[Path, ...], model: str, url: str | None, protocol: str | None, k: int, batch: int, as_json: bool
) -> None:
    """Classify IMAGE files with a model served by Triton, printing the top-k classes with labels.

    Images are preprocessed exactly as at export (the spec is read from the served model's config) and sent as
    binary tensors with tritonclient; a NAME_pipeline model gets the encoded files as they are (its server
    decodes and preprocesses them). Batches are sent concurrently.
    """
    if k < 1 or batch < 1:
        raise UsageError("--top-k and --batch must be at least 1")
    with TritonClient(url, protocol) as client:
        predictions = classify(client, model, list(images), batch=batch, k=k)
        if as_json:
            emit_json({"ok": True, "model": model, "url": client.url, "predictions": predictions})
            return
    for prediction in predictions:
        click.echo(prediction["image"])
        for rank, entry in enumerate(prediction["top_k"], 1):
            click.echo(f"  {rank}. {entry['label']:<24} {entry['probability']:7.2%}  (score {entry['score']:.4f})")
