"""Hugging Face image models as users save them (`save_pretrained` folders with the image processor's
preprocessor_config.json), made offline from configs: small ViT, ConvNeXt and SegFormer models with random weights
made realistic (`make_realistic`: BatchNorm statistics from real photos, no all-zero weights), and labels in
id2label. Nothing is downloaded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from modelship.testing.realistic import make_realistic

SEED = 0


@dataclass(frozen=True)
class VisionFolder:
    """One kind of folder: its config and model classes, the config's sizes, its processor class and settings."""

    config: str
    model: str
    sizes: dict[str, Any]
    processor: str
    processor_settings: dict[str, Any]
    labels: int


FOLDERS = {
    "vit": VisionFolder(
        "ViTConfig",
        "ViTForImageClassification",
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128},
        "ViTImageProcessor",
        {},
        10,
    ),
    "convnext": VisionFolder(
        "ConvNextConfig",
        "ConvNextForImageClassification",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 2, 1]},
        "ConvNextImageProcessor",
        {"size": {"shortest_edge": 224}},
        10,
    ),
    "segformer": VisionFolder(
        "SegformerConfig",
        "SegformerForSemanticSegmentation",
        {"hidden_sizes": [16, 32, 64, 128], "decoder_hidden_size": 64, "depths": [1, 1, 1, 1]},
        "SegformerImageProcessor",
        {"size": {"height": 256, "width": 256}},
        5,
    ),
}


def save_vision_folder(kind: str, folder: Path, *, photos: list[Path] | None = None) -> Path:
    """`FOLDERS[kind]` saved in `folder` (model.safetensors, config.json, preprocessor_config.json); its BatchNorm
    statistics calibrated on `photos` (the bundled ones by default) through its own processor."""
    import transformers

    from modelship.testing.photos import source_photos

    entry = FOLDERS[kind]
    labels = {str(i): f"class {i}" for i in range(entry.labels)}
    config = getattr(transformers, entry.config)(
        **entry.sizes, id2label=labels, label2id={v: int(k) for k, v in labels.items()}
    )
    torch.manual_seed(SEED)
    model = getattr(transformers, entry.model)(config).eval()
    processor = getattr(transformers, entry.processor)(**entry.processor_settings)
    pixels = _pixels(processor, photos or source_photos())
    make_realistic(_Pixels(model), pixels)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _pixels(processor: Callable[..., Any], photos: list[Path]) -> torch.Tensor:
    from PIL import Image

    images = [Image.open(path).convert("RGB") for path in photos]
    return processor(images=images, return_tensors="pt")["pixel_values"]


class _Pixels(torch.nn.Module):
    """forward(pixel_values): the model called as make_realistic calls it."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> Any:
        return self.model(pixel_values=pixel_values)
