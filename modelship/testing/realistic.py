"""Put a randomly initialised model in a realistic state, so parity figures on it mean something.

Fresh models can be degenerate in eval mode: zero-initialised heads or last BatchNorm weights (ViT, timm) give
constant outputs, and default BatchNorm running statistics (mean 0, var 1) let activations explode or vanish.
`make_realistic` re-initialises all-zero weights and recalibrates BatchNorm statistics with a few train-mode
passes over seeded inputs. Used by tests, the parity zoo, benchmarks and the demo.
"""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def make_realistic(
    model: nn.Module,
    example_inputs: tuple[torch.Tensor, ...] | torch.Tensor,
    *,
    calibration_passes: int = 4,
    seed: int = 0,
) -> nn.Module:
    """Re-initialise all-zero float weights, recalibrate BatchNorm statistics; return the model in eval mode.

    `example_inputs` is one batch (a tensor or a tuple of forward arguments); calibration runs on it and on
    seeded perturbations of its float tensors.
    """
    generator = torch.Generator().manual_seed(seed)
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    for name, param in model.named_parameters():
        if not param.is_floating_point() or param.numel() < 2 or param.any():
            continue
        if name.endswith("weight") and param.dim() == 1:  # a zero-initialised norm scale (timm's last BN)
            param.copy_(1.0 + 0.1 * torch.randn(param.shape, generator=generator))
        else:
            param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration passes
    if norms:
        model.train()
        for i in range(calibration_passes):
            batch = tuple(
                t + 0.1 * i * torch.randn(t.shape, generator=generator) if t.is_floating_point() else t for t in inputs
            )
            model(*batch)
        for bn in norms:
            bn.momentum = 0.1
    return model.eval()


@torch.no_grad()
def make_realistic_detector(detector: nn.Module, images: torch.Tensor, *, head_std: float = 0.1) -> nn.Module:
    """A torchvision detector whose answers mean something: its backbone's BatchNorm calibrated on `images`
    ([batch, 3, H, W] in 0..1, normalised as the detector does inside) and its class and box heads drawn wider
    (default initialisation scores every class alike, so every box ties and their order is arbitrary)."""
    transform = detector.transform
    mean = torch.tensor(transform.image_mean).view(1, 3, 1, 1)
    std = torch.tensor(transform.image_std).view(1, 3, 1, 1)
    make_realistic(detector.backbone, ((images - mean) / std,))
    generator = torch.Generator().manual_seed(0)
    for name, param in detector.named_parameters():
        if param.dim() > 1 and any(part in name for part in ("classification_head", "cls_logits", "box_predictor")):
            param.copy_(torch.randn(param.shape, generator=generator) * head_std)
    return detector.eval()
