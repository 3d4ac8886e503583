"""Class names a classifier's own architecture knows, so served top-k results read "tabby cat", not "281".

Nothing is downloaded: torchvision ships its weights' category lists, timm its ImageNet synsets and descriptions
(`checkpoint.families`).
Labels in the checkpoint's metadata always win; these apply only when the head has exactly as many classes.
"""

from __future__ import annotations

from modelship.contract.iospec import TensorSpec


def default_labels(arch: str, output: TensorSpec) -> list[str] | None:
    """The category names of `arch`'s reference weights (its model family's) when `output` (batch, classes) has as
    many classes."""
    from modelship.checkpoint.families import family_of

    classes = output.shape[-1] if len(output.shape) == 2 else None
    if not isinstance(classes, int):
        return None
    names = family_of(arch).labels(arch, classes)
    return names if names is not None and len(names) == classes else None
