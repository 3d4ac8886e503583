"""Hugging Face image models as users save them (`save_pretrained` folders with the image processor's
preprocessor_config.json), made offline from configs: small ViT, ConvNeXt, SegFormer and DETR (a plain ResNet
backbone) models with random weights made realistic (`make_realistic`: BatchNorm statistics from real photos, no
all-zero weights; DETR's queries made distinct and its heads given a trained one's spread, `_realistic_detr`), and
labels in id2label. Nothing is downloaded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from modelship.contract.json_object import JsonObject
from modelship.testing.realistic import make_realistic

if TYPE_CHECKING:
    from transformers import DetrForObjectDetection

SEED = 0


@dataclass(frozen=True)
class VisionFolder:
    """One kind of folder: its config and model classes, the config's sizes, its processor class and settings."""

    config: str
    model: str
    sizes: JsonObject
    processor: str
    processor_settings: JsonObject
    labels: int
    heads: Callable[[torch.nn.Module, torch.Tensor], None] | None = None  # makes it realistic instead of make_realistic


QUERY_FOCUS = 100.0  # cross-attention logits scaled this much: each query looks at its own part of the image
CLASS_SPREAD = 2.0  # the class logits' standard deviation, as a trained head's
BOX_SPREAD = 40.0  # the box head's last layer scaled up: boxes of many sizes and places


@torch.no_grad()
def _realistic_detr(model: DetrForObjectDetection, pixels: torch.Tensor) -> None:
    """A fresh DETR answers the same box for every query (its query embeddings start near zero and its cross-attention
    is uniform): the queries drawn at unit scale, the cross-attention sharpened, the class and box heads scaled to a
    trained one's spread on `pixels`."""
    generator = torch.Generator().manual_seed(SEED)
    queries = model.model.query_position_embeddings.weight
    queries.copy_(torch.randn(queries.shape, generator=generator))
    for layer in model.model.decoder.layers:
        layer.encoder_attn.q_proj.weight.mul_(QUERY_FOCUS**0.5)
        layer.encoder_attn.k_proj.weight.mul_(QUERY_FOCUS**0.5)
    cast(torch.nn.Linear, model.bbox_predictor.layers[-1]).weight.mul_(BOX_SPREAD)
    logits = model(pixel_values=pixels).logits
    model.class_labels_classifier.weight.mul_(CLASS_SPREAD / float(logits.std()))


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
    "detr": VisionFolder(
        "DetrConfig",
        "DetrForObjectDetection",
        {
            "use_timm_backbone": False,
            "use_pretrained_backbone": False,
            "backbone": None,
            "backbone_config": {
                "model_type": "resnet",
                "embedding_size": 16,
                "hidden_sizes": [16, 32, 64, 128],
                "depths": [1, 1, 1, 1],
                "layer_type": "basic",
                "out_features": ["stage4"],
            },
            "d_model": 64,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 128,
            "decoder_ffn_dim": 128,
            "num_queries": 20,
        },
        "DetrImageProcessor",
        {"size": {"shortest_edge": 320, "longest_edge": 512}},
        5,
        heads=lambda model, pixels: _realistic_detr(cast("DetrForObjectDetection", model), pixels),
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
    if entry.heads is None:
        make_realistic(_Pixels(model), pixels)
    else:  # its own (DETR: frozen BatchNorm, zero biases as trained ones start; random biases would drown its queries)
        entry.heads(model, pixels)
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
