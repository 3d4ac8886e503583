"""Whether the preprocessing can feed the model's image input, decided before any work: a spec whose images are not
the size of an input fixed at HxW (or whose size follows each photo's) would end minutes later, in calibration or
verification, in ONNX Runtime's "Got invalid dimensions for input". Refused in one line naming the fix."""

from __future__ import annotations

from modelship.contract.errors import UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.preprocessing import PreprocessSpec

IMAGE_RANK = 4  # (batch, channels, height, width)


def image_input(io: IOSpec) -> TensorSpec | None:
    """The model's image input: its first float input of rank 4."""
    return next((t for t in io.inputs if len(t.shape) == IMAGE_RANK and t.dtype.startswith("float")), None)


def check_preprocess_fits(io: IOSpec, preprocess: PreprocessSpec | None) -> None:
    """A UsageError when `preprocess` makes images of another size than the image input's fixed height and width."""
    image = image_input(io)
    if preprocess is None or image is None:
        return
    height, width = image.shape[2:]
    if not isinstance(height, int) or not isinstance(width, int):  # a dynamic axis takes any size
        return
    made = preprocess.output_hw
    if made == (height, width):
        return
    makes = f"{made[0]}x{made[1]} images" if made else "images whose size follows each photo's (no crop)"
    crop = f"{height}" if height == width else f"{height}x{width}"
    raise UsageError(
        f"the preprocessing makes {makes} but the model's input {image.name!r} is fixed at {height}x{width}",
        hint=f"give --preprocess a crop of the model's size (crop={crop}, after a resize no smaller), or make the "
        "input's height and width dynamic with --dynamic height,width",
    )
