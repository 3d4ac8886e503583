"""Hugging Face folders, named `transformers/CLASS`: an image model's preprocessing is its image processor's
(preprocessor_config.json, read by transformers' `AutoImageProcessor`, reproduced by `preprocess.hf_processor`), and
the processor itself is the reference `parity --images` compares against. Labels come from config.json's id2label
(checkpoint metadata). transformers models hold their config and do not script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelship.checkpoint.families.registry import ModelFamily, ReferenceTransform, register_family
from modelship.checkpoint.hf_folder import ARCH_PREFIX, read_hf_folder
from modelship.contract.preprocessing import PreprocessSpec


def serving_spec(model: Any, arch: str, checkpoint: Path) -> PreprocessSpec | None:
    from modelship.checkpoint.hf_vision import image_spec

    folder = read_hf_folder(Path(checkpoint), arch)
    return image_spec(folder) if folder.processor is not None else None


def reference_transform(model: Any, arch: str, checkpoint: Path) -> ReferenceTransform | None:
    from modelship.checkpoint.hf_vision import read_processor

    folder = read_hf_folder(Path(checkpoint), arch)
    if folder.processor is None:
        return None
    processor = read_processor(folder)

    def transform(image: Any) -> Any:
        return processor(images=image, return_tensors="pt")["pixel_values"][0]

    return ReferenceTransform(transform, f"transformers {type(processor).__name__} ({folder.processor})")


FAMILY = register_family(
    ModelFamily(
        "huggingface",
        owns=lambda arch: arch.startswith(ARCH_PREFIX),
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        scripts=False,
    )
)
