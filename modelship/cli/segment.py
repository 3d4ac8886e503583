"""What `modelship infer` shows for a segmentation model: each class's share of every photo, and with `--save DIR`
the photo tinted by class (`<stem>_mask.png`). A `_pipeline` model answers the class mask at the photo's own size
(its server decodes, preprocesses and postprocesses); a bare artifact model answers class scores, which become the
mask here with the same code (`modelship.postprocess`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelship.cli.photo_requests import photo_request, save_folder
from modelship.contract.errors import ClientError
from modelship.contract.labels import label_for
from modelship.drawing import overlay
from modelship.postprocess import class_mask, class_shares
from modelship.preprocess.image import load_image
from modelship.serve.client import TritonClient
from modelship.serve.image_pipeline import MASK
from modelship.serve.model_info import ModelInfo, TensorInfo


@dataclass(frozen=True)
class ClassShare:
    index: int
    label: str
    share: float

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "label": self.label, "share": self.share}


@dataclass(frozen=True)
class Segmentation:
    """One photo's answer: its size, the classes it shows (largest share first) and the overlay written."""

    image: Path
    height: int
    width: int
    classes: list[ClassShare]
    overlay: Path | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "image": str(self.image),
            "size": [self.height, self.width],
            "classes": [c.to_dict() for c in self.classes],
            "overlay": str(self.overlay) if self.overlay else None,
        }


def segment(
    client: TritonClient, info: ModelInfo, tensor: TensorInfo, images: list[Path], save: Path | None
) -> list[Segmentation]:
    """One request per photo (each keeps its own size), sent at once; the masks, shares and overlays."""
    classes = _classes(info)
    photos = [load_image(path) for path in images]
    pipeline = tensor.datatype == "BYTES"
    output = MASK if pipeline else info.outputs[0].name
    requests = [{tensor.name: photo_request(info, tensor, p, photo)} for p, photo in zip(images, photos, strict=True)]
    save = save_folder(save)
    results = client.infer_many(info.name, requests, outputs=[output])
    answers = []
    for path, photo, result in zip(images, photos, results, strict=True):
        size = (photo.height, photo.width)
        mask = result[output][0] if pipeline else class_mask(result[output][0], size)
        if mask.shape != size:
            raise ClientError(f"model {info.name!r} answered a {list(mask.shape)} mask for a {size} photo")
        written = None if save is None else save / f"{Path(path).stem}_mask.png"
        if written is not None:
            overlay(photo, mask, classes).save(written)
        answers.append(Segmentation(Path(path), *size, _shares(mask, classes, info.labels), written))
    return answers


def _classes(info: ModelInfo) -> int:
    """How many classes the model scores: the class axis of its first output ([batch, classes, height, width])."""
    scores = info.outputs[0] if info.outputs else None
    if scores is None or len(scores.shape) != 4 or scores.shape[1] < 1:
        raise ClientError(f"model {info.name!r}: its first output is not [batch, classes, height, width] scores")
    return int(scores.shape[1])


def _shares(mask: np.ndarray, classes: int, labels: list[str] | None) -> list[ClassShare]:
    shares = class_shares(mask, classes)
    shown = [int(i) for i in np.argsort(-shares, kind="stable") if shares[i] > 0]
    return [ClassShare(i, label_for(i, labels), float(shares[i])) for i in shown]
