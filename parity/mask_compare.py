"""The `mask` compare function: a segmentation output ([batch, classes, height, width] logits) judged as the masks
it gives (the argmax class per pixel: the share of pixels whose class differs, per-class IoU) and as logits
(element-wise, as any tensor). Registered on import of `modelship.parity`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import modelship.parity.metrics as metrics
from modelship.contract.mask_result import MaskMetrics
from modelship.parity.compare import CompareFunction, register_compare
from modelship.parity.tolerance import Tolerance

IOU_MIN_SHARE = 1e-3  # classes covering less of the reference's pixels are reported, not judged by IoU


def compare_masks(name: str, reference: np.ndarray, candidate: np.ndarray, tolerance: Tolerance) -> MaskMetrics:
    tensor = metrics.compare_arrays(name, reference, candidate, tolerance, topk=False)
    ref, cand = np.asarray(reference), np.asarray(candidate)
    if ref.shape != cand.shape or ref.ndim != 4:
        reason = tensor.failures[0] if tensor.failures else f"a mask output is [batch, classes, H, W], got {ref.shape}"
        return missing_mask(name, ref, reason)
    ref_mask = np.nan_to_num(ref.astype(np.float64), nan=-np.inf).argmax(axis=1)
    cand_mask = np.nan_to_num(cand.astype(np.float64), nan=-np.inf).argmax(axis=1)
    counts = {}
    for cls in np.union1d(np.unique(ref_mask), np.unique(cand_mask)):
        in_ref, in_cand = ref_mask == cls, cand_mask == cls
        counts[int(cls)] = (int((in_ref & in_cand).sum()), int((in_ref | in_cand).sum()), int(in_ref.sum()))
    return _judged(name, tensor, int(ref_mask.size), int((ref_mask != cand_mask).sum()), counts, tolerance)


def _judged(
    name: str,
    tensor: metrics.OutputMetrics,
    pixels: int,
    differing: int,
    counts: dict[int, tuple[int, int, int]],
    tolerance: Tolerance,
) -> MaskMetrics:
    judged = {c: inter / union for c, (inter, union, ref) in counts.items() if union and ref >= IOU_MIN_SHARE * pixels}
    mean_iou = float(np.mean(list(judged.values()))) if judged else 1.0
    worst = min(judged, key=judged.__getitem__) if judged else None
    result = MaskMetrics(
        name=name,
        tensor=tensor,
        pixels=pixels,
        disagreement=differing / max(pixels, 1),
        mean_iou=mean_iou,
        worst_iou=judged[worst] if worst is not None else 1.0,
        worst_class=worst,
        class_counts=counts,
    )
    result.failures = list(tensor.failures)
    bar = tolerance.max_mask_disagreement
    if bar is not None and result.disagreement > bar:
        result.failures.append(f"{result.disagreement:.3%} of pixels change class (bar {bar:.3%})")
    if tolerance.min_mask_iou is not None and mean_iou < tolerance.min_mask_iou:
        result.failures.append(
            f"mean per-class IoU {mean_iou:.4f} below {tolerance.min_mask_iou:g} (worst: class {worst}, "
            f"{result.worst_iou:.4f})"
        )
    result.passed = not result.failures
    return result


def aggregate_masks(per_set: Sequence[MaskMetrics], tolerance: Tolerance) -> MaskMetrics:
    """Pixels and per-class counts summed over the sets, logits judged worst case; a set that could not be compared
    (no mask, another shape) is the verdict."""
    unmatched = [r for r in per_set if not r.pixels]
    if len(per_set) == 1 or unmatched:
        return (unmatched or list(per_set))[0]
    tensor = metrics.aggregate([r.tensor for r in per_set], tolerance)
    counts: dict[int, tuple[int, int, int]] = {}
    for result in per_set:
        for cls, values in result.class_counts.items():
            inter, union, ref = counts.get(cls, (0, 0, 0))
            counts[cls] = (inter + values[0], union + values[1], ref + values[2])
    pixels = sum(r.pixels for r in per_set)
    differing = round(sum(r.disagreement * r.pixels for r in per_set))
    return _judged(per_set[0].name, tensor, pixels, differing, counts, tolerance)


def missing_mask(name: str, reference: np.ndarray, reason: str) -> MaskMetrics:
    tensor = metrics.unmatched(name, np.asarray(reference), reason, topk=False)
    return MaskMetrics(name, tensor, 0, 1.0, 0.0, 0.0, None, passed=False, failures=[reason])


MASK = register_compare(
    CompareFunction(
        "mask",
        "masks by pixel agreement and per-class IoU, logits by element-wise tolerance and cosine",
        compare_masks,
        aggregate_masks,
        missing_mask,
    )
)
