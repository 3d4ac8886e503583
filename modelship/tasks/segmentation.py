"""`segmentation`: per-pixel class scores ([batch, classes, height, width], torchvision's `out`). Each such output
is compared as masks (the share of pixels whose class changes, per-class IoU) and as logits; other outputs as
tensors. Height and width are dynamic by default: a segmenter takes images of any size."""

from __future__ import annotations

from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.tasks.registry import Preprocessing, Task, register_task


def is_mask(spec: TensorSpec, io: IOSpec | None = None) -> bool:
    """A [batch, classes, H, W] float output whose H and W follow the first input's (the same axis names or sizes)."""
    if len(spec.shape) != 4 or not spec.dtype.startswith("float"):
        return False
    if io is None or not io.inputs or len(io.inputs[0].shape) != 4:
        return True
    return tuple(spec.shape[2:]) == tuple(io.inputs[0].shape[2:])


def claims(io: IOSpec) -> bool:
    """An image model whose first output is a mask of the image's size."""
    image = io.inputs[0] if io.inputs else None
    return bool(image and len(image.shape) == 4 and image.shape[1] == 3 and io.outputs and is_mask(io.outputs[0], io))


SEGMENTATION = register_task(
    Task(
        name="segmentation",
        description="per-pixel class scores, compared as masks (pixel agreement, per-class IoU) and as logits",
        output_kind=lambda spec: "mask" if is_mask(spec) else "tensor",
        claims=claims,
        preprocessing=Preprocessing.IMAGE,
        labels=True,
        label_output=False,
        dynamic=("height", "width"),
        pipeline_mask=True,
    )
)
