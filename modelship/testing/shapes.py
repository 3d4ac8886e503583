"""Synthetic shapes, and a segmenter and a detector that learn them in seconds.

A random-weight segmenter or detector answers noise: its masks and boxes can agree between eager and an artifact,
but nothing says whether a served pipeline finds what is in a picture. These two are trained here (the way the demo
trains its digits classifier) on scenes of coloured squares, discs and triangles on a noisy grey background, so
that a test can draw a scene, send it through a served `_pipeline` and check that the shapes come back where they
were drawn. Both are small enough to train on two CPU cores in well under a minute and are ordinary torchvision
kinds behind the usual interfaces: `ShapesSegmenter` answers `{"out": [batch, classes, H, W]}` like torchvision's
segmenters, `shapes_detector` builds a torchvision FCOS, so export, parity and publish treat them as any other.

Checkpoints carry their preprocessing and labels in their metadata; the architecture is named on the command line
(`export-model --arch modelship.testing.shapes:ShapesSegmenter`), since files may not name code.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw
from torch import Tensor, nn

from modelship.contract.preprocessing import PreprocessSpec

LABELS = ["background", "square", "disc", "triangle"]
COLOURS = {1: (220, 50, 40), 2: (40, 190, 70), 3: (50, 90, 225)}
SIZE = 128
SEGMENTER_ARCH = "modelship.testing.shapes:ShapesSegmenter"
DETECTOR_ARCH = "modelship.testing.shapes:shapes_detector"
# the segmenter normalises like torchvision's presets and takes the picture at its own size; the detector takes
# RGB in [0, 1] and resizes and normalises inside, as torchvision's detectors do
SEGMENTER_PREPROCESS = PreprocessSpec(resize=None, crop=None)
DETECTOR_PREPROCESS = PreprocessSpec(resize=None, crop=None, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))


@dataclass(frozen=True)
class Scene:
    """A drawn picture and what is in it: the class of every pixel and one box (x1, y1, x2, y2) per shape."""

    image: Image.Image
    mask: np.ndarray  # [H, W] int64 class per pixel
    boxes: np.ndarray  # [n, 4] float32, in pixels, x2 and y2 exclusive
    labels: np.ndarray  # [n] int64


def draw_scene(rng: np.random.Generator, width: int = SIZE, height: int = SIZE, shapes: int | None = None) -> Scene:
    """1 to 3 shapes (or `shapes`), 22% to 45% of the shorter side, apart from each other, colours jittered."""
    background = rng.integers(70, 150)
    pixels = np.clip(background + rng.normal(0, 12, (height, width, 3)), 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    mask_image = Image.new("L", (width, height), 0)
    canvas, labels_canvas = ImageDraw.Draw(image), ImageDraw.Draw(mask_image)
    boxes: list[tuple[int, int, int, int]] = []
    labels: list[int] = []
    wanted = int(rng.integers(1, 4)) if shapes is None else shapes
    for _ in range(50 * wanted):
        if len(boxes) == wanted:
            break
        side = int(rng.integers(int(0.22 * min(width, height)), int(0.45 * min(width, height))))
        x, y = int(rng.integers(0, width - side)), int(rng.integers(0, height - side))
        box = (x, y, x + side, y + side)
        if any(x < b[2] + 2 and b[0] < box[2] + 2 and y < b[3] + 2 and b[1] < box[3] + 2 for b in boxes):
            continue
        label = int(rng.integers(1, len(LABELS)))
        colour = tuple(int(np.clip(c + rng.integers(-25, 26), 0, 255)) for c in COLOURS[label])
        for draw, fill in ((canvas, colour), (labels_canvas, label)):
            _draw_shape(draw, label, box, fill)
        boxes.append(box)
        labels.append(label)
    mask = np.asarray(mask_image, dtype=np.int64)
    return Scene(image, mask, np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64))


def _draw_shape(
    draw: ImageDraw.ImageDraw, label: int, box: tuple[int, int, int, int], fill: int | tuple[int, ...]
) -> None:
    x1, y1, x2, y2 = box[0], box[1], box[2] - 1, box[3] - 1
    if label == 1:
        draw.rectangle((x1, y1, x2, y2), fill=fill)
    elif label == 2:
        draw.ellipse((x1, y1, x2, y2), fill=fill)
    else:
        draw.polygon([((x1 + x2) / 2, y1), (x2, y2), (x1, y2)], fill=fill)


def _block(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class ShapesSegmenter(nn.Module):
    """Four convolutions at a quarter of the resolution, a 1x1 classifier, scores upsampled to the image's size."""

    def __init__(self, num_classes: int = len(LABELS), width: int = 16) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            _block(3, width, 2), _block(width, 2 * width, 2), _block(2 * width, 2 * width, dilation=2)
        )
        self.classifier = nn.Conv2d(2 * width, num_classes, 1)

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        scores = self.classifier(self.backbone(image))
        return {"out": F.interpolate(scores, size=image.shape[-2:], mode="bilinear", align_corners=False)}


class _Features(nn.Module):
    """Two feature maps, strides 8 and 16, `out_channels` each (what torchvision's FCOS asks of a backbone)."""

    def __init__(self, out_channels: int) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.stem = nn.Sequential(_block(3, 16, 2), _block(16, 32, 2), _block(32, out_channels, 2))
        self.down = _block(out_channels, out_channels, 2)

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        eighth = self.stem(image)
        return OrderedDict([("0", eighth), ("1", self.down(eighth))])


def shapes_detector(num_classes: int = len(LABELS), width: int = 32, **kwargs: object) -> nn.Module:
    """A torchvision FCOS on two small feature maps, resizing every image to SIZE pixels inside."""
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator

    points = AnchorGenerator(sizes=((8,), (16,)), aspect_ratios=((1.0,), (1.0,)))  # one point per cell, per stride
    settings: dict[str, object] = {
        "min_size": SIZE,
        "max_size": SIZE,
        "score_thresh": 0.3,
        "detections_per_img": 20,
        "topk_candidates": 100,
        **kwargs,
    }
    return FCOS(_Features(width), num_classes, anchor_generator=points, **settings)


@dataclass
class TrainedShapes:
    """A trained model and the metadata export-model reads from its checkpoint."""

    model: nn.Module
    arch: str
    preprocess: PreprocessSpec
    steps: int

    def save(self, path: Path) -> Path:
        """{state_dict, preprocess, labels}: the architecture is named on the command line (`arch`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        metadata = {"preprocess": self.preprocess.to_dict(), "labels": LABELS, "steps": self.steps}
        torch.save({"state_dict": self.model.state_dict(), **metadata}, path)
        return path


def _batches(seed: int, count: int, batch: int) -> list[list[Scene]]:
    rng = np.random.default_rng(seed)
    return [[draw_scene(rng) for _ in range(batch)] for _ in range(count)]


def _tensor(images: list[Image.Image], spec: PreprocessSpec) -> Tensor:
    from modelship.preprocess import preprocess_images

    return torch.from_numpy(preprocess_images(images, spec))


def _fit(
    model: nn.Module, loss_of: Callable[[nn.Module, list[Scene]], Tensor], steps: int, batch: int, lr: float, seed: int
) -> nn.Module:
    """Adam on `loss_of(model, scenes)` over `steps` batches of fresh scenes; the model in eval mode."""
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for scenes in _batches(seed, steps, batch):
        loss = loss_of(model, scenes)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


def _mask_loss(model: nn.Module, scenes: list[Scene]) -> Tensor:
    images = _tensor([s.image for s in scenes], SEGMENTER_PREPROCESS)
    return F.cross_entropy(model(images)["out"], torch.from_numpy(np.stack([s.mask for s in scenes])))


def _detection_loss(model: nn.Module, scenes: list[Scene]) -> Tensor:
    images = list(_tensor([s.image for s in scenes], DETECTOR_PREPROCESS))
    targets = [{"boxes": torch.from_numpy(s.boxes), "labels": torch.from_numpy(s.labels)} for s in scenes]
    return sum(model(images, targets).values())


def train_segmenter(steps: int = 150, batch: int = 16, seed: int = 0) -> TrainedShapes:
    """Pixel-wise cross-entropy; about 15 s on two cores."""
    torch.manual_seed(seed)
    model = _fit(ShapesSegmenter(), _mask_loss, steps, batch, 1e-2, seed)
    return TrainedShapes(model, SEGMENTER_ARCH, SEGMENTER_PREPROCESS, steps)


def train_detector(steps: int = 300, batch: int = 8, seed: int = 0) -> TrainedShapes:
    """FCOS's own losses (focal classification, GIoU boxes, centre-ness); about 30 s on two cores."""
    torch.manual_seed(seed)
    model = _fit(shapes_detector(), _detection_loss, steps, batch, 2e-3, seed)
    return TrainedShapes(model, DETECTOR_ARCH, DETECTOR_PREPROCESS, steps)
