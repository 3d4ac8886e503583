"""The `detections` compare function: a detector's padded outputs (boxes, scores, labels, num; the interface of
`families.torchvision_detector`) judged as detections, boxes matched one to one (contract.box_result). Element-wise
comparison of the padded tensors is not a verdict: boxes reorder, and NMS ties and the score threshold legitimately
add or drop a box near the edge. Registered on import of `modelship.parity`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from modelship.contract.box_result import DETECTION_OUTPUTS, BoxMetrics
from modelship.contract.candidate_pool import CandidatePool
from modelship.contract.keypoint_peaks import KeypointPeaks
from modelship.parity.compare import CompareFunction, register_compare
from modelship.parity.tolerance import Tolerance

MATCH_IOU = 0.5
DEGENERATE_PAD = 0.5  # px: how much a zero-area box grows each way to be matched
PASTE_SCALE = 30 / 28  # torchvision's paste_masks_in_image: a 28x28 mask padded by one pixel each side
PASTE_TIE = 1e-3  # px: a widened corner this close to a whole pixel may truncate either way
MASK_THRESHOLD = 0.5  # Mask R-CNN's masks are probabilities: a pixel is in the instance above this
SCORE_RESOLUTION = 1e-6  # the least score difference taken as measured error (float32 scores near 1)
IOU_RESOLUTION = 1e-4  # two boxes this close to the NMS threshold may fall either side of it
EXTRAS = ("masks", "keypoints")  # per-detection outputs of the models that have them, compared on matched boxes


def iou_matrix(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pairwise IoU of [n, 4] and [m, 4] (x1, y1, x2, y2) boxes."""
    top_left = np.maximum(first[:, None, :2], second[None, :, :2])
    bottom_right = np.minimum(first[:, None, 2:], second[None, :, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    union = _area(first)[:, None] + _area(second)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _area(boxes: np.ndarray) -> np.ndarray:
    return np.prod(np.clip(boxes[:, 2:] - boxes[:, :2], 0, None), axis=1)


def overlaps(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Pairwise IoU of [n, 4] and [m, 4] boxes, a pair with a zero-area box (a detector's box clipped to a line at
    the image's edge) measured on both boxes grown by DEGENERATE_PAD each way: two equal lines overlap fully
    instead of not at all."""
    iou = iou_matrix(first, second)
    flat = [_area(b) <= 0 for b in (first, second)]
    if flat[0].any() or flat[1].any():
        pad = np.array([-DEGENERATE_PAD, -DEGENERATE_PAD, DEGENERATE_PAD, DEGENERATE_PAD])
        either = flat[0][:, None] | flat[1][None, :]
        iou = np.where(either, iou_matrix(first + pad, second + pad), iou)
    return iou


def match_boxes(
    ref_boxes: np.ndarray, ref_labels: np.ndarray, cand_boxes: np.ndarray, cand_labels: np.ndarray
) -> list[tuple[int, int]]:
    """One-to-one (reference, candidate) index pairs: same label, IoU >= MATCH_IOU (`overlaps`), best overlaps
    first."""
    iou = overlaps(ref_boxes, cand_boxes)
    iou[ref_labels[:, None] != cand_labels[None, :]] = 0.0
    pairs, used_ref, used_cand = [], set(), set()
    for flat in np.argsort(-iou, axis=None, kind="stable"):
        i, j = divmod(int(flat), iou.shape[1])
        if iou[i, j] < MATCH_IOU:
            break
        if i not in used_ref and j not in used_cand:
            pairs.append((i, j))
            used_ref.add(i)
            used_cand.add(j)
    return pairs


def compare_detections(
    name: str, reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray], tolerance: Tolerance
) -> BoxMetrics:
    problem = _shape_problem(reference, candidate)
    if problem:
        return missing_detections(name, reference, problem)
    ref, cand = ({k: np.asarray(outputs[k]) for k in DETECTION_OUTPUTS} for outputs in (reference, candidate))
    pool = CandidatePool.from_outputs(reference)
    peaks = KeypointPeaks.from_outputs(reference)
    rows = ref["boxes"].shape[1]
    images = ref["boxes"].shape[0]
    result = BoxMetrics(name, images, 0, 0, 0, 0.0, 0.0, 0)
    edge_scores: list[float] = []
    for image in range(images):
        r, c = (_valid(side, image) for side in (ref, cand))
        result.reference_boxes += len(r[1])
        result.candidate_boxes += len(c[1])
        ties = Ties(r, c, match_boxes(r[0], r[2], c[0], c[2]), pool.image(image) if pool else None, tolerance, rows)
        pairs = ties.pairs
        if pairs:
            i, j = (np.array(side) for side in zip(*pairs, strict=True))
            result.max_box_diff = max(result.max_box_diff, float(np.abs(r[0][i] - c[0][j]).max()))
            result.max_score_diff = max(result.max_score_diff, float(np.abs(r[1][i] - c[1][j]).max()))
            ties_at = (peaks, ties.bar, tolerance.score_atol or 0.0)
            _compare_extras(result, reference, candidate, image, (i, j), ties_at)
        result.matched += len(pairs)
        result.tie_flips += ties.flipped
        full = [float(side[1].min()) for side in (r, c) if len(side[1]) == rows]  # a full list's edge: its last
        edge = max([tolerance.score_edge or 0.0, *full])
        left = [float(r[1][k]) for k in ties.reference_left] + [float(c[1][k]) for k in ties.candidate_left]
        near = [s for s in left if s <= edge + (tolerance.score_margin or 0.0)]
        result.tolerated += len(near)
        edge_scores += [s for s in left if s not in near]
    result.unmatched_scores = sorted(edge_scores, reverse=True)
    return _judged(result, tolerance)


Side = tuple[np.ndarray, np.ndarray, np.ndarray]  # one image's valid boxes, scores and labels


def measured_error(largest: float, cap: float) -> float:
    """The numeric error a tie may hide in: the largest difference measured where both sides agree, doubled (either
    side may err), at least SCORE_RESOLUTION and at most `cap`."""
    return min(max(2 * largest, SCORE_RESOLUTION), cap)


class Ties:
    """One image's boxes after telling ties from differences.

    NMS, the per-class top-k and the count cut are discrete decisions on continuous scores: where two boxes score
    within the numeric error of each other, the candidate may keep the one the reference dropped, and the one-to-one
    matcher then pairs two different, overlapping boxes (a "move" of many pixels) or leaves both unmatched. Such a
    difference is a tie flip when both of its boxes are explained:

    - a candidate's box by the reference's candidate pool: the reference scored the very same box (within the box
      tolerance) at the same score (within the measured error) and dropped it, and the candidate's own answer keeps
      no other box of its label overlapping it past the NMS threshold;
    - a reference's box by the candidate: a box of its label that overlaps it beyond the NMS threshold and scores at
      least as high (within the measured error), or one that is itself an explained candidate box (a two-stage
      detector's proposal tie: the candidate kept the neighbouring proposal, whose box the reference scored too),
      or a full candidate list whose last score it does not beat.

    The measured error is the largest score difference of the boxes that matched in place, doubled (either side
    may err), at least SCORE_RESOLUTION and at most the score tolerance. Without a pool (golden data of older
    exports, a served reference) nothing is a tie flip. A moved box of a broken decoding or resize is in no pool,
    so it stays a difference."""

    def __init__(
        self, r: Side, c: Side, pairs: list[tuple[int, int]], pool: CandidatePool | None, tol: Tolerance, rows: int
    ) -> None:
        self.r, self.c, self.pool, self.rows = r, c, pool, rows
        self.bar = tol.box_atol if tol.box_atol is not None else np.inf
        in_place = [(i, j) for i, j in pairs if np.abs(r[0][i] - c[0][j]).max() <= self.bar]
        measured = max((abs(r[1][i] - c[1][j]) for i, j in in_place), default=0.0)
        self.window = measured_error(measured, tol.score_atol if tol.score_atol is not None else 1.0)
        moved = [p for p in pairs if p not in in_place]
        flipped = [(i, j) for i, j in moved if pool is not None and self.candidate_tie(j) and self.reference_tie(i)]
        self.pairs = [p for p in pairs if p not in flipped]
        paired_r, paired_c = {i for i, _ in pairs}, {j for _, j in pairs}
        lone_r = [i for i in range(len(r[1])) if i not in paired_r]
        lone_c = [j for j in range(len(c[1])) if j not in paired_c]
        self.reference_left = [i for i in lone_r if pool is None or not self.reference_tie(i)]
        self.candidate_left = [j for j in lone_c if pool is None or not self.candidate_tie(j)]
        explained = len(lone_r) - len(self.reference_left) + len(lone_c) - len(self.candidate_left)
        self.flipped = 2 * len(flipped) + explained  # boxes, on either side

    def candidate_tie(self, j: int) -> bool:
        """The reference scored candidate box j the same and dropped it, and the candidate's NMS kept no other box
        of its label that overlaps it past the threshold (no correct NMS keeps both)."""
        assert self.pool is not None
        box, score, label = self.c[0][j], self.c[1][j], self.c[2][j]
        same = self.pool.labels[0] == label
        near = np.abs(self.pool.boxes[0][same] - box).max(axis=1, initial=0.0) <= self.bar
        if not (np.abs(self.pool.scores[0][same][near] - score) <= self.window).any():
            return False
        others = (self.c[2] == label) & (np.arange(len(self.c[1])) != j)
        overlap = overlaps(box[None], self.c[0][others])[0]
        return not (overlap > self.pool.iou_threshold + IOU_RESOLUTION).any()

    def reference_tie(self, i: int) -> bool:
        """Reference box i lost to a candidate box of its label that overlaps it past the NMS threshold and scores
        as high within the error or is itself explained by the pool, or to the count cut of a full candidate
        list."""
        assert self.pool is not None
        score = self.r[1][i]
        if len(self.c[1]) == self.rows and score <= self.c[1].min() + self.window:
            return True
        overlap = overlaps(self.r[0][i][None], self.c[0])[0]
        rivals = np.flatnonzero((self.c[2] == self.r[2][i]) & (overlap > self.pool.iou_threshold - IOU_RESOLUTION))
        return any(self.c[1][j] >= score - self.window or self.candidate_tie(j) for j in rivals)


def _compare_extras(
    result: BoxMetrics,
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    image: int,
    rows: tuple[np.ndarray, np.ndarray],
    ties_at: tuple[KeypointPeaks | None, float, float],
) -> None:
    """Matched boxes' masks by IoU and keypoints by pixels, worst case into `result`. Mask and keypoint ties are
    no disagreement (`mask_iou`, `_keypoint_ties`); `ties_at`: the reference's keypoint peaks, the box bar and
    the score window."""
    peaks, bar, window = ties_at
    ref_rows, cand_rows = rows
    if "masks" in reference:
        ref_prob = np.asarray(reference["masks"])[image, ref_rows].astype(np.float64)
        cand_prob = np.asarray(candidate["masks"])[image, cand_rows].astype(np.float64)
        boxes = np.asarray(reference["boxes"], dtype=np.float64)[image, ref_rows]
        pairs = zip(ref_prob, cand_prob, boxes, strict=True)
        worst = min((mask_iou(a, b, window, box) for a, b, box in pairs), default=1.0)
        result.mask_iou = worst if result.mask_iou is None else min(result.mask_iou, worst)
    if "keypoints" in reference:
        sides = (reference, candidate)
        points = [
            np.asarray(side["keypoints"], np.float64)[image, r, :, :2] for side, r in zip(sides, rows, strict=True)
        ]
        moves = np.abs(points[0] - points[1]).max(axis=-1, initial=0.0)
        if peaks is not None and (moves > bar).any() and "keypoints_scores" in candidate:
            scores = [
                np.asarray(side["keypoints_scores"], np.float64)[image, r] for side, r in zip(sides, rows, strict=True)
            ]
            result.keypoint_ties += _keypoint_ties(moves, points[1], scores, peaks.image(image, ref_rows), bar, window)
        moved = float(moves.max(initial=0.0))
        result.keypoint_diff = moved if result.keypoint_diff is None else max(result.keypoint_diff, moved)


def _keypoint_ties(
    moves: np.ndarray, moved_to: np.ndarray, scores: list[np.ndarray], peaks: KeypointPeaks, bar: float, window: float
) -> int:
    """Zero the `moves` [matched, K] past `bar` that are ties (`contract.keypoint_peaks`: onto a runner-up of the
    reference's heatmap scoring within the measured error, or on a grid tie) and count them. The measured error is
    the largest keypoint score difference of the keypoints that stayed in place, doubled, at least
    SCORE_RESOLUTION and at most `window`."""
    error = measured_error(float(np.abs(scores[0] - scores[1])[moves <= bar].max(initial=0.0)), window)
    tied = 0
    for row, keypoint in zip(*np.nonzero(moves > bar), strict=True):
        if peaks.tied(int(row), int(keypoint), moved_to[row, keypoint], bar, error):
            moves[row, keypoint] = 0.0
            tied += 1
    return tied


def mask_iou(reference: np.ndarray, candidate: np.ndarray, window: float, box: np.ndarray) -> float:
    """The IoU of two instances' masks (probabilities, in the image's pixels) after their ties. A pixel on the other
    side of MASK_THRESHOLD whose probability moved by no more than `window` (an untrained mask head answers 0.5
    everywhere) leaves the union. And torchvision pastes each mask into the box widened by 2/28, its corners
    truncated to whole pixels: where a widened corner lands within float error of a whole pixel (186.998 in eager,
    187.0001 traced), the two sides paste into regions one pixel apart and resample the whole mask differently, a
    tie of that rounding, recognised from the reference's `box`; such an instance counts as agreeing (its box is
    still judged)."""
    regions = [_region(side) for side in (reference, candidate)]
    if None not in regions and regions[0] != regions[1]:
        near = max(abs(a - b) for a, b in zip(*regions, strict=True)) <= 1
        if near and _corner_on_a_pixel_edge(box):
            return 1.0
    ref_mask, cand_mask = reference > MASK_THRESHOLD, candidate > MASK_THRESHOLD
    tied = (ref_mask != cand_mask) & (np.abs(reference - candidate) <= window)
    union = int((ref_mask | cand_mask).sum() - tied.sum())
    return float((ref_mask & cand_mask).sum() / union) if union > 0 else 1.0


def _corner_on_a_pixel_edge(box: np.ndarray) -> bool:
    """Whether a corner of `box` widened as torchvision widens it to paste a mask lands within PASTE_TIE of a whole
    pixel, where float error decides which pixel it truncates to."""
    centre, half = (box[:2] + box[2:]) / 2, (box[2:] - box[:2]) / 2 * PASTE_SCALE
    corners = np.concatenate([centre - half, centre + half])
    return bool((np.abs(corners - np.round(corners)) <= PASTE_TIE).any())


def _region(probabilities: np.ndarray) -> tuple[int, int, int, int] | None:
    """The rows and columns (first, last) holding a pasted probability, None when nothing was pasted."""
    rows = np.flatnonzero((probabilities > 0).any(axis=-1).reshape(-1, probabilities.shape[-2]).any(axis=0))
    cols = np.flatnonzero((probabilities > 0).any(axis=-2).reshape(-1, probabilities.shape[-1]).any(axis=0))
    if not len(rows) or not len(cols):
        return None
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


def _valid(outputs: Mapping[str, np.ndarray], image: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    count = int(outputs["num"].reshape(-1)[image])
    return (
        outputs["boxes"][image, :count].astype(np.float64),
        outputs["scores"][image, :count].astype(np.float64),
        outputs["labels"][image, :count],
    )


def _shape_problem(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> str | None:
    for side, outputs in (("reference", reference), ("candidate", candidate)):
        missing = [k for k in DETECTION_OUTPUTS if k not in outputs]
        if missing:
            return f"the {side} gave no {', '.join(missing)} output (a detector answers {', '.join(DETECTION_OUTPUTS)})"
        num, rows = np.asarray(outputs["num"]).reshape(-1), np.asarray(outputs["boxes"]).shape
        if len(rows) != 3 or rows[2] != 4 or num.shape != (rows[0],) or (num > rows[1]).any() or (num < 0).any():
            return f"the {side}'s boxes {list(rows)} and num {num.tolist()} are not a padded detection batch"
        if not np.isfinite(np.asarray(outputs["boxes"], dtype=np.float64)).all():
            return f"the {side}'s boxes are not all finite"
    lost = [k for k in EXTRAS if k in reference and k not in candidate]
    if lost:
        return f"the candidate gave no {', '.join(lost)} output"
    if np.asarray(reference["boxes"]).shape[0] != np.asarray(candidate["boxes"]).shape[0]:
        return "the candidate answered another number of images"
    return None


def _judged(result: BoxMetrics, tolerance: Tolerance) -> BoxMetrics:
    failures = []
    if tolerance.box_atol is not None and result.max_box_diff > tolerance.box_atol:
        failures.append(f"matched boxes move by up to {result.max_box_diff:.3g} px (bar {tolerance.box_atol:g})")
    if tolerance.score_atol is not None and result.max_score_diff > tolerance.score_atol:
        failures.append(f"matched scores differ by up to {result.max_score_diff:.3g} (bar {tolerance.score_atol:g})")
    if result.mask_iou is not None and tolerance.min_mask_iou is not None and result.mask_iou < tolerance.min_mask_iou:
        failures.append(
            f"matched boxes' masks overlap down to IoU {result.mask_iou:.4f} (bar {tolerance.min_mask_iou:g})"
        )
    if (
        result.keypoint_diff is not None
        and tolerance.box_atol is not None
        and result.keypoint_diff > tolerance.box_atol
    ):
        failures.append(f"matched keypoints move by up to {result.keypoint_diff:.3g} px (bar {tolerance.box_atol:g})")
    if result.unmatched_scores:
        shown = ", ".join(f"{s:.3f}" for s in result.unmatched_scores[:5])
        failures.append(
            f"{result.unmatched} box{'es' if result.unmatched > 1 else ''} unmatched above the score edge "
            f"(scores {shown}{', ...' if result.unmatched > 5 else ''})"
        )
    result.failures = failures
    result.passed = not failures
    return result


def aggregate_detections(per_set: Sequence[BoxMetrics], tolerance: Tolerance) -> BoxMetrics:
    """Counts summed over the sets, differences worst case; a set that could not be compared is the verdict."""
    broken = [r for r in per_set if not r.images]
    if len(per_set) == 1 or broken:
        return (broken or list(per_set))[0]
    pooled = BoxMetrics(
        per_set[0].name,
        sum(r.images for r in per_set),
        sum(r.reference_boxes for r in per_set),
        sum(r.candidate_boxes for r in per_set),
        sum(r.matched for r in per_set),
        max(r.max_box_diff for r in per_set),
        max(r.max_score_diff for r in per_set),
        sum(r.tolerated for r in per_set),
        sum(r.tie_flips for r in per_set),
        sorted((s for r in per_set for s in r.unmatched_scores), reverse=True),
        _worst([r.mask_iou for r in per_set], min),
        _worst([r.keypoint_diff for r in per_set], max),
        keypoint_ties=sum(r.keypoint_ties for r in per_set),
    )
    return _judged(pooled, tolerance)


def _worst(values: list[float | None], pick: Callable[[list[float]], float]) -> float | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def missing_detections(name: str, reference: Mapping[str, np.ndarray], reason: str) -> BoxMetrics:
    boxes = int(np.asarray(reference.get("num", np.zeros(0))).sum()) if "num" in reference else 0
    return BoxMetrics(name, 0, boxes, 0, 0, 0.0, 0.0, 0, passed=False, failures=[reason])


DETECTIONS = register_compare(
    CompareFunction(
        "detections",
        "boxes matched one to one by IoU (same label), compared on pixels and scores; unmatched boxes only near "
        "the score edge",
        compare_detections,
        aggregate_detections,
        missing_detections,
        joint=True,
    )
)
