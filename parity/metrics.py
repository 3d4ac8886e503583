"""Pure numpy comparison of one output tensor against its reference (Polygraphy-style statistics).

Differences are computed in float64 over the positions where both tensors are finite; NaN/Inf must sit at the
same positions (with the same sign) in both or the output fails. Relative error divides by
`max(|reference|, REL_EPS)` so zeros in the reference do not explode it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from modelship.contract.parity_report import OutputMetrics
from modelship.parity.tolerance import Tolerance

REL_EPS = 1e-6
TOPK = 5


def compare_arrays(
    name: str, reference: np.ndarray, candidate: np.ndarray, tolerance: Tolerance, *, topk: bool = True
) -> OutputMetrics:
    """Statistics and verdict for one output on one input set; with `topk`, top-1/top-k agreement too when the
    output is classifier-shaped."""
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    if ref.shape != cand.shape:
        return unmatched(name, ref, f"shape {cand.shape} differs from reference {ref.shape}", topk=topk)
    ref64 = ref.astype(np.float64)
    cand64 = cand.astype(np.float64)
    finite = np.isfinite(ref64) & np.isfinite(cand64)
    structural = []
    if not _nonfinite_matches(ref64, cand64):
        structural.append(
            f"non-finite values differ: candidate {int(np.isnan(cand64).sum())} NaN/{int(np.isinf(cand64).sum())} Inf, "
            f"reference {int(np.isnan(ref64).sum())} NaN/{int(np.isinf(ref64).sum())} Inf"
        )
    diff = np.abs(cand64[finite] - ref64[finite])
    ref_abs = np.abs(ref64)[finite]
    if diff.size:
        rel = diff / np.maximum(ref_abs, REL_EPS)
        stats = (diff.max(), rel.max(), diff.mean(), np.median(diff), np.percentile(diff, 99))
        required_atol = float(max(0.0, (diff - tolerance.rtol * ref_abs).max()))
        required_rtol = float((np.maximum(diff - tolerance.atol, 0.0) / np.maximum(ref_abs, REL_EPS)).max())
    else:
        stats = (0.0, 0.0, 0.0, 0.0, 0.0)
        required_atol = required_rtol = 0.0
    top1, top_k, contained = _agreement(ref64, cand64) if topk and _is_classifier(ref) else (None, None, None)
    metrics = OutputMetrics(
        name=name,
        shape=tuple(ref.shape),
        max_abs=float(stats[0]),
        max_rel=float(stats[1]),
        mean_abs=float(stats[2]),
        median_abs=float(stats[3]),
        p99_abs=float(stats[4]),
        cosine=_min_cosine(np.where(finite, ref64, 0.0), np.where(finite, cand64, 0.0)),
        top1_agreement=top1,
        topk_agreement=top_k,
        top5_containment=contained,
        nan_count=int(np.isnan(cand64).sum()),
        inf_count=int(np.isinf(cand64).sum()),
        reference_nan_count=int(np.isnan(ref64).sum()),
        reference_inf_count=int(np.isinf(ref64).sum()),
        required_atol=required_atol,
        required_rtol=required_rtol,
        samples=_samples(ref),
        structural_failures=structural,
    )
    return judge(metrics, tolerance)


def judge(metrics: OutputMetrics, tolerance: Tolerance) -> OutputMetrics:
    """Set `failures` (structural ones first, then tolerance violations) and `passed`."""
    metrics.failures = list(metrics.structural_failures)
    if not math.isinf(metrics.required_atol):  # infinite only when nothing was comparable (shapes differ)
        metrics.failures += _tolerance_failures(metrics, tolerance)
    metrics.passed = not metrics.failures
    return metrics


def _tolerance_failures(metrics: OutputMetrics, tolerance: Tolerance) -> list[str]:
    failures = []
    if tolerance.elementwise and metrics.required_atol > tolerance.atol:
        failures.append(
            f"max abs diff {metrics.max_abs:.3g} exceeds atol {tolerance.atol:g} + rtol {tolerance.rtol:g}*|ref| "
            f"(needs atol >= {metrics.required_atol:.3g} or rtol >= {metrics.required_rtol:.3g})"
        )
    if tolerance.min_cosine is not None and metrics.cosine < tolerance.min_cosine:
        failures.append(f"cosine {metrics.cosine:.6f} below {tolerance.min_cosine:g}")
    top1 = metrics.top1_agreement
    if tolerance.min_top1 is not None and top1 is not None and top1 < tolerance.min_top1:
        failures.append(f"top-1 agreement {top1:.3f} below {tolerance.min_top1:g}")
    contained = metrics.top5_containment
    if tolerance.min_top5 is not None and contained is not None and contained < tolerance.min_top5:
        failures.append(f"reference class in the top 5 for {contained:.3f} of samples, below {tolerance.min_top5:g}")
    return failures


def aggregate(per_set: Sequence[OutputMetrics], tolerance: Tolerance) -> OutputMetrics:
    """Worst case over input sets (max of differences, min of cosine); top-1/top-k agreement pooled over samples."""
    first = per_set[0]
    if len(per_set) == 1:
        return first
    samples = sum(m.samples for m in per_set)

    def pooled(attr: str) -> float | None:
        values = [getattr(m, attr) for m in per_set]
        if any(v is None for v in values):
            return None
        return float(sum(v * m.samples for v, m in zip(values, per_set, strict=True)) / max(samples, 1))

    merged = OutputMetrics(
        name=first.name,
        shape=_common_shape([m.shape for m in per_set]),
        max_abs=max(m.max_abs for m in per_set),
        max_rel=max(m.max_rel for m in per_set),
        mean_abs=max(m.mean_abs for m in per_set),
        median_abs=max(m.median_abs for m in per_set),
        p99_abs=max(m.p99_abs for m in per_set),
        cosine=min(m.cosine for m in per_set),
        top1_agreement=pooled("top1_agreement"),
        topk_agreement=pooled("topk_agreement"),
        top5_containment=pooled("top5_containment"),
        nan_count=sum(m.nan_count for m in per_set),
        inf_count=sum(m.inf_count for m in per_set),
        reference_nan_count=sum(m.reference_nan_count for m in per_set),
        reference_inf_count=sum(m.reference_inf_count for m in per_set),
        required_atol=max(m.required_atol for m in per_set),
        required_rtol=max(m.required_rtol for m in per_set),
        samples=samples,
        structural_failures=list(dict.fromkeys(f for m in per_set for f in m.structural_failures)),
    )
    return judge(merged, tolerance)


def _common_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape shared by every input set, -1 where a dimension varies (the batch)."""
    if len({len(s) for s in shapes}) != 1:
        return ()
    return tuple(dims[0] if len(set(dims)) == 1 else -1 for dims in zip(*shapes, strict=True))


def unmatched(name: str, ref: np.ndarray, reason: str, *, topk: bool = True) -> OutputMetrics:
    """A failed comparison where nothing could be compared (shape differs, output missing)."""
    inf = float("inf")
    agreement = 0.0 if topk and _is_classifier(ref) else None
    return OutputMetrics(
        name=name,
        shape=tuple(ref.shape),
        max_abs=inf,
        max_rel=inf,
        mean_abs=inf,
        median_abs=inf,
        p99_abs=inf,
        cosine=-1.0,
        top1_agreement=agreement,
        topk_agreement=agreement,
        top5_containment=agreement,
        nan_count=0,
        inf_count=0,
        reference_nan_count=int(np.isnan(ref.astype(np.float64)).sum()),
        reference_inf_count=int(np.isinf(ref.astype(np.float64)).sum()),
        required_atol=inf,
        required_rtol=inf,
        samples=_samples(ref),
        passed=False,
        failures=[reason],
        structural_failures=[reason],
    )


def _nonfinite_matches(ref: np.ndarray, cand: np.ndarray) -> bool:
    if not (np.isnan(ref) == np.isnan(cand)).all():
        return False
    ref_inf, cand_inf = np.isinf(ref), np.isinf(cand)
    return bool((ref_inf == cand_inf).all() and (ref[ref_inf] == cand[cand_inf]).all())


def _is_classifier(ref: np.ndarray) -> bool:
    return ref.ndim == 2 and ref.shape[1] >= 2 and np.issubdtype(ref.dtype, np.floating)


def _samples(ref: np.ndarray) -> int:
    return int(ref.shape[0]) if ref.ndim >= 2 else 1


def _agreement(ref: np.ndarray, cand: np.ndarray) -> tuple[float, float, float]:
    """Top-1 agreement, the mean overlap of the top-k sets, and the share of samples whose reference class is in
    the candidate's top k (TOPK)."""
    if ref.shape[0] == 0:
        return 1.0, 1.0, 1.0
    ref = np.nan_to_num(ref, nan=-np.inf)
    cand = np.nan_to_num(cand, nan=-np.inf)
    top1 = float((ref.argmax(axis=1) == cand.argmax(axis=1)).mean())
    k = min(TOPK, ref.shape[1])
    ref_k = np.argsort(-ref, axis=1, kind="stable")[:, :k]
    cand_k = np.argsort(-cand, axis=1, kind="stable")[:, :k]
    overlap = [len(np.intersect1d(a, b)) / k for a, b in zip(ref_k, cand_k, strict=True)]
    contained = float(np.mean([row[0] in other for row, other in zip(ref_k, cand_k, strict=True)]))
    return top1, float(np.mean(overlap)), contained


def _min_cosine(ref: np.ndarray, cand: np.ndarray) -> float:
    if ref.size == 0:
        return 1.0
    rows_ref = ref.reshape(ref.shape[0], -1) if ref.ndim >= 2 else ref.reshape(1, -1)
    rows_cand = cand.reshape(rows_ref.shape)
    dot = (rows_ref * rows_cand).sum(axis=1)
    norms = np.linalg.norm(rows_ref, axis=1) * np.linalg.norm(rows_cand, axis=1)
    both_zero = (np.linalg.norm(rows_ref, axis=1) == 0) & (np.linalg.norm(rows_cand, axis=1) == 0)
    cos = np.where(norms > 0, dot / np.where(norms > 0, norms, 1.0), 0.0)
    cos = np.where(both_zero, 1.0, cos)
    return float(np.clip(cos.min(), -1.0, 1.0))
