"""torchvision's detector resize, computed the way eager PyTorch computes it in every format.

A torchvision detector resizes each image inside (`GeneralizedRCNNTransform`): the scale is min(min_size / shorter
side, max_size / longer side) and the new size floor(side * scale). Eager PyTorch computes that in double precision.
Scripted and traced for ONNX, torchvision computes the scale in float32, so where the limiting side should land on
`min_size` exactly it lands one pixel short: a 168x224 image becomes 800x1066 in eager PyTorch and 799x1066 in
TorchScript and ONNX, and a 96x220 image 55x128 against 55x127 with `min_size = max_size = 128`. Every box then
moves. `use_exact_resize` gives a detector's transform a `resize` that computes the size in double precision in
eager PyTorch, TorchScript and the ONNX graph alike, then resizes to that size, which is what eager torchvision
does (`recompute_scale_factor=True` samples by the size, not the scale).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.models.detection.transform import GeneralizedRCNNTransform

__all__ = ["ExactResizeTransform", "use_exact_resize"]


class ExactResizeTransform(GeneralizedRCNNTransform):
    """GeneralizedRCNNTransform whose inference resize is computed in double precision (module docstring)."""

    def resize(self, image: Tensor, target: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor] | None]:
        torch._assert(target is None, "ExactResizeTransform resizes images for inference only (no targets)")
        if self.fixed_size is not None:  # SSD: one size for every image (torchvision passes it this way round)
            size = [self.fixed_size[1], self.fixed_size[0]]
            return F.interpolate(image[None], size=size, mode="bilinear", align_corners=False)[0], target
        shorter, longer = float(self.min_size[-1]), float(self.max_size)
        if torch.jit.is_scripting():  # TorchScript compiles only this branch; its floats are doubles
            height, width = float(image.shape[-2]), float(image.shape[-1])
            scale = min(shorter / min(height, width), longer / max(height, width))
            size = [math.floor(height * scale), math.floor(width * scale)]
            return F.interpolate(image[None], size=size, mode="bilinear", align_corners=False)[0], target
        return _resize_traceable(image, shorter, longer), target


@torch.jit.unused
def _resize_traceable(image: Tensor, shorter: float, longer: float) -> Tensor:
    """Eager and traced: the size from the image's shape as a tensor (so the ONNX graph computes it per image), in
    float64 on 1-D tensors (the legacy ONNX exporter casts 0-d tensors and Python numbers to float32)."""
    sides = torch._shape_as_tensor(image)[-2:].to(torch.float64)
    limits = torch.tensor([shorter, longer], dtype=torch.float64)
    scale = (limits / torch.stack([sides.amin(0), sides.amax(0)])).amin(0, keepdim=True)
    size = torch.floor(sides * scale).to(torch.int64)
    if torch.jit.is_tracing():
        resized = F.interpolate(image[None], size=[size[0], size[1]], mode="bilinear", align_corners=False)
    else:
        resized = F.interpolate(image[None], size=size.tolist(), mode="bilinear", align_corners=False)
    return resized[0]


def use_exact_resize(detector: nn.Module) -> None:
    """Give `detector`'s GeneralizedRCNNTransform the exact resize; its settings (sizes, mean, std) are kept."""
    transform = detector.transform
    if isinstance(transform, GeneralizedRCNNTransform) and not isinstance(transform, ExactResizeTransform):
        transform.__class__ = ExactResizeTransform
