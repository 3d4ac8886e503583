"""What `modelship infer` shows for a detection model: per photo, every detection scoring at least `--min-score`
(label, score, box in the photo's pixels), and with `--save DIR` the photo with its boxes drawn (`<stem>_boxes.png`).
A `_pipeline` model and the bare artifact answer the same tensors (boxes, scores, labels, num: docs/export.md); a
photo with nothing in it answers no detections."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from modelship.cli.photo_requests import photo_request, save_folder
from modelship.contract.box_result import DETECTION_OUTPUTS
from modelship.contract.errors import ClientError
from modelship.contract.labels import label_for
from modelship.drawing import draw_boxes
from modelship.preprocess.image import load_image
from modelship.serve.client import TritonClient
from modelship.serve.model_info import ModelInfo, TensorInfo

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Detection:
    index: int
    label: str
    score: float
    box: Box  # x1, y1, x2, y2 in the photo's pixels

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "label": self.label, "score": self.score, "box": list(self.box)}


@dataclass(frozen=True)
class Detections:
    """One photo's answer: its size, its detections (best first) and the drawing written."""

    image: Path
    height: int
    width: int
    detections: list[Detection]
    drawn: Path | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "image": str(self.image),
            "size": [self.height, self.width],
            "detections": [d.to_dict() for d in self.detections],
            "drawn": str(self.drawn) if self.drawn else None,
        }


def detect(
    client: TritonClient,
    info: ModelInfo,
    tensor: TensorInfo,
    images: list[Path],
    save: Path | None,
    min_score: float,
) -> list[Detections]:
    """One request per photo (each keeps its own size), sent at once; the detections and drawings."""
    served = {own: name for name, own in info.io_names.outputs.items()}  # LibTorch serves OUTPUT__i
    missing = [name for name in DETECTION_OUTPUTS if name not in served]
    if missing:
        raise ClientError(f"model {info.name!r} answers no {', '.join(missing)}: not modelship's detection outputs")
    photos = [load_image(path) for path in images]
    requests = [{tensor.name: photo_request(info, tensor, p, photo)} for p, photo in zip(images, photos, strict=True)]
    save = save_folder(save)
    results = client.infer_many(info.name, requests, outputs=[served[name] for name in DETECTION_OUTPUTS])
    answers = []
    for path, photo, result in zip(images, photos, results, strict=True):
        count = int(np.asarray(result[served["num"]]).reshape(-1)[0])
        boxes, scores, labels = (np.asarray(result[served[name]])[0, :count] for name in ("boxes", "scores", "labels"))
        keep = scores >= min_score
        found = [
            Detection(int(c), label_for(int(c), info.labels), float(s), cast(Box, tuple(float(v) for v in b)))
            for b, s, c in zip(boxes[keep], scores[keep], labels[keep], strict=True)
        ]
        drawn = None if save is None else save / f"{Path(path).stem}_boxes.png"
        if drawn is not None:
            names = [f"{d.label} {d.score:.2f}" for d in found]
            draw_boxes(photo, boxes[keep], names, labels[keep]).save(drawn)
        answers.append(Detections(Path(path), photo.height, photo.width, found, drawn))
    return answers
