"""Put a randomly initialised model in a realistic state, so parity figures on it mean something.

Fresh models can be degenerate in eval mode: zero-initialised heads or last BatchNorm weights (ViT, timm) give
constant outputs, and default BatchNorm running statistics (mean 0, var 1) let activations explode or vanish.
`make_realistic` re-initialises all-zero weights and recalibrates BatchNorm statistics with a few train-mode
passes over seeded inputs. Used by tests, the parity zoo, benchmarks and the demo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from modelship.checkpoint.families.torchvision_detector import Detector


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
def make_realistic_detector(detector: nn.Module, images: torch.Tensor, *, passes: int = 3) -> nn.Module:
    """A torchvision detector whose answers mean something: its backbone's BatchNorm calibrated on `images`
    ([batch, 3, H, W] in 0..1, normalised as the detector does inside), then the last layer of every head rescaled
    so that, on those images, its outputs have the spread and centre of a trained one (`_head_targets`).

    Default initialisation scores every class alike, so every box ties and their order is arbitrary; heads drawn
    at random without care saturate (every score 1.0: ties again), put boxes far from their anchors (clipped to
    lines at the image's edge), or leave masks and keypoint heatmaps flat (a pixel's class, a keypoint's place,
    decided by float noise). Then eager PyTorch disagrees with itself on inputs a millionth apart, and no parity
    verdict on such a model means anything."""
    calibrate_detector_backbone(detector, images)
    noise = torch.rand(images.shape, generator=torch.Generator().manual_seed(0))  # what verification sends, too
    targets = _head_targets(detector)
    layers = {name: module for name, module in detector.named_modules() if name in targets}
    for _ in range(passes):  # a head's inputs move when the heads before it (the RPN's proposals) are rescaled
        outputs: dict[str, list[torch.Tensor]] = {name: [] for name in layers}
        hooks = [
            module.register_forward_hook(lambda _m, _i, out, name=name, seen=outputs: seen[name].append(out.flatten()))
            for name, module in layers.items()
        ]
        detector([*images, *noise])
        for hook in hooks:
            hook.remove()
        for name, module in layers.items():
            seen = torch.cat(outputs[name])
            spread, centre = targets[name]
            gain = spread / max(float(seen.std()), 1e-12)
            module.weight.mul_(gain)
            module.bias.copy_((module.bias - seen.mean()) * gain + centre)
    return detector


def calibrate_detector_backbone(detector: Detector, images: torch.Tensor) -> nn.Module:
    """A torchvision detector as an early training checkpoint has it: its backbone's BatchNorm statistics calibrated
    on `images` ([batch, 3, H, W] in 0..1, normalised as the detector does inside), its heads as initialised (every
    class scored almost alike, so NMS and the count cut meet near-ties everywhere). Returned in eval mode."""
    transform = detector.transform
    mean = torch.tensor(transform.image_mean).view(1, 3, 1, 1)
    std = torch.tensor(transform.image_std).view(1, 3, 1, 1)
    make_realistic(detector.backbone, ((images - mean) / std,))
    return detector.eval()


def _head_targets(detector: nn.Module) -> dict[str, tuple[float, float]]:
    """The last layer of each head, by module name, with the (std, mean) its outputs get: class logits spread so
    boxes rank apart (an R-CNN's RPN objectness too: drawn at random on a ResNet-50's features it reached +-50,
    every proposal scored 1.0 and their NMS order was arbitrary), box offsets small (boxes near their anchors or
    proposals; FCOS's are distances to the box's sides, in strides, so positive), masks and keypoint heatmaps
    decisive."""
    from torchvision.models.detection import FCOS, RetinaNet
    from torchvision.models.detection.ssd import SSD

    scores, offsets = (1.0, 0.0), (0.2, 0.0)
    if isinstance(detector, FCOS):
        return {
            "head.classification_head.cls_logits": (2.0, -3.0),
            "head.regression_head.bbox_reg": (0.5, 2.0),
            "head.regression_head.bbox_ctrness": scores,
        }
    if isinstance(detector, RetinaNet):
        return {"head.classification_head.cls_logits": (2.0, -3.0), "head.regression_head.bbox_reg": offsets}
    if isinstance(detector, SSD):
        targets = {}
        for branch, target in (("classification_head", scores), ("regression_head", offsets)):
            for index, block in enumerate(getattr(detector.head, branch).module_list):
                last = [name for name, m in block.named_modules() if isinstance(m, nn.Conv2d)][-1]
                targets[".".join(filter(None, ("head", branch, "module_list", str(index), last)))] = target
        return targets
    return {
        "rpn.head.cls_logits": (2.0, -3.0),
        "roi_heads.box_predictor.cls_score": (2.0, 0.0),
        "roi_heads.box_predictor.bbox_pred": offsets,
        "roi_heads.mask_predictor.mask_fcn_logits": (4.0, 0.0),
        "roi_heads.keypoint_predictor.kps_score_lowres": (4.0, 0.0),
    }
