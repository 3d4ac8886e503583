"""torchvision's detector resize, computed the way eager PyTorch computes it in every format.

A torchvision detector resizes each image inside (`GeneralizedRCNNTransform`): the scale is min(min_size / shorter
side, max_size / longer side) and the new size floor(side * scale). Eager PyTorch computes that in double precision.
Scripted and traced for ONNX, torchvision computes the scale in float32, so where the limiting side should land on
`min_size` exactly it lands one pixel short: a 168x224 image becomes 800x1066 in eager PyTorch and 799x1066 in
TorchScript and ONNX, and a 96x220 image 55x128 against 55x127 with `min_size = max_size = 128`. Every box then
moves. `use_exact_resize` gives a detector's transform a `resize` that computes the size in double precision in
eager PyTorch, TorchScript and the ONNX graph alike, then resizes to that size, which is what eager torchvision
does (`recompute_scale_factor=True` samples by the size, not the scale).

The ONNX graph also samples as eager PyTorch does. ONNX Runtime's bilinear `Resize` finds each output pixel's
source as (x + 0.5) / (out / in) - 0.5, PyTorch as one fused multiply-add, (in / out) * (x + 0.5) - 0.5 rounded
once: up to 3e-5 apart on a 0..1 image resized to 800 px, enough to flip a Faster R-CNN's NMS ties (a box moved by
20 px). Traced, the resize is written out (`_bilinear`: PyTorch's sample positions and weights, gathers, multiplies
and adds), within 1.2e-7 of eager's.
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
        shorter, longer = float(self.min_size[-1]), float(self.max_size)
        if torch.jit.is_scripting():  # TorchScript compiles only this branch; its floats are doubles
            if self.fixed_size is not None:  # SSD: one size for every image (torchvision passes it this way round)
                size = [self.fixed_size[1], self.fixed_size[0]]
            else:
                height, width = float(image.shape[-2]), float(image.shape[-1])
                scale = min(shorter / min(height, width), longer / max(height, width))
                size = [math.floor(height * scale), math.floor(width * scale)]
            return F.interpolate(image[None], size=size, mode="bilinear", align_corners=False)[0], target
        fixed = None if self.fixed_size is None else (self.fixed_size[1], self.fixed_size[0])
        return _resize_traceable(image, shorter, longer, fixed), target


@torch.jit.unused
def _resize_traceable(image: Tensor, shorter: float, longer: float, fixed: tuple[int, int] | None) -> Tensor:
    """Eager and traced: the size `fixed` (height, width), else from the image's shape as a tensor (so the ONNX
    graph computes it per image), in float64 on 1-D tensors (the legacy ONNX exporter casts 0-d tensors and Python
    numbers to float32); traced, sampled by `_bilinear`."""
    if fixed is not None:
        size = torch.tensor(fixed)
    else:
        sides = torch._shape_as_tensor(image)[-2:].to(torch.float64)
        limits = torch.tensor([shorter, longer], dtype=torch.float64)
        scale = (limits / torch.stack([sides.amin(0), sides.amax(0)])).amin(0, keepdim=True)
        size = torch.floor(sides * scale).to(torch.int64)
    if torch.jit.is_tracing():
        return _bilinear(image, size)
    return F.interpolate(image[None], size=size.tolist(), mode="bilinear", align_corners=False)[0]


def _bilinear(image: Tensor, size: Tensor) -> Tensor:
    """`F.interpolate(image[None], size, mode="bilinear", align_corners=False)[0]` written out for the ONNX graph,
    sampling where PyTorch's CPU kernel samples (module docstring); `image` [C, H, W], `size` int64 [2]."""
    shape = torch._shape_as_tensor(image)
    top, bottom, upper, lower = _linear_samples(shape[1], size[0])
    left, right, near, far = _linear_samples(shape[2], size[1])
    rows = [image.index_select(1, index) for index in (top, bottom)]
    blended = [row.index_select(2, left) * near + row.index_select(2, right) * far for row in rows]
    return blended[0] * upper[:, None] + blended[1] * lower[:, None]


def _linear_samples(source: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Along one axis of `source` pixels resized to `target`: each output pixel's two source indices and their
    weights, as PyTorch computes them (align_corners=False): the position (in / out) * (x + 0.5) - 0.5 in float32
    with one rounding (computed in float64, as its fused multiply-add does), at least 0; the lower index its floor
    (at most the last pixel), the upper the next one (the last pixel's own)."""
    scale = (source.to(torch.float32) / target.to(torch.float32)).to(torch.float64)
    centres = (torch.arange(target, dtype=torch.float32) + 0.5).to(torch.float64)  # type: ignore[call-overload]
    position = (scale * centres - 0.5).to(torch.float32).clamp(min=0)
    last = source - 1
    lower = torch.min(position.floor().to(torch.int64), last)
    weight = (position - lower.to(torch.float32)).clamp(0, 1)
    upper = lower + (lower < last).to(torch.int64)
    return lower, upper, 1 - weight, weight


def use_exact_resize(detector: nn.Module) -> None:
    """Give `detector`'s GeneralizedRCNNTransform the exact resize; its settings (sizes, mean, std) are kept."""
    transform = detector.transform
    if isinstance(transform, GeneralizedRCNNTransform) and not isinstance(transform, ExactResizeTransform):
        transform.__class__ = ExactResizeTransform
