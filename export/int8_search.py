"""The INT8 search, apart from what quantizes and judges: which recipes are tried in which order, what a recipe that
fails to quantize counts as, how the float set grows, and whether the variant ships or is declined (and in what
words). Pure: `attempt` (quantize one recipe and judge it) and `rank` (order the quantized nodes by the harm they do)
are given, so every outcome is decided here and testable with fakes.

1. The base recipes in order (the faster first); the first `pair` are all judged, then the others only until one
   passes. A recipe ONNX Runtime's quantizer fails on is one failed try, recorded with its reason; the search goes
   on.
2. The closest try (contract.artifact_details.Int8Try.closeness) is refined: a static recipe tries percentile
   calibration once (when `percentile`), then its worst nodes are kept float, 1, 2, 3, 4, 6, 9, ... of them (never
   more than MAX_FLOAT_SHARE of the quantized nodes), until one passes or `trials` tries are spent.
3. `decline` says in one line why a variant is not written: every recipe failed to quantize, none was accurate
   enough (with the closest figures reached), or it passed and measured slower than fp32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from modelship.contract.artifact_details import Int8Try
from modelship.contract.errors import ExportError
from modelship.export.int8 import Int8Recipe
from modelship.parity import ParityReport

INT8_TRIALS = 8  # quantizations tried in all (each is a calibration and a verdict on the held-back inputs)
MAX_FLOAT_SHARE = 0.5  # of the quantized nodes, at most this share is kept float
NAME = "onnx_int8"


@dataclass(frozen=True)
class Judged:
    """One recipe tried: its verdict on the held-back inputs (None: ONNX Runtime's quantizer failed on it, `record`
    says why) and the record the manifest keeps."""

    recipe: Int8Recipe
    report: ParityReport | None
    record: Int8Try

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed


@dataclass(frozen=True)
class Ranking:
    """The quantized nodes worst first, each one's error, and what that error measures (for the choices)."""

    nodes: list[str]
    errors: dict[str, float]
    measure: str


Attempt = Callable[[Int8Recipe], Judged]
Rank = Callable[[Judged], Ranking]


@dataclass
class Search:
    """The search's outcome: `chosen`, the passing try or else the closest that quantized (None: none did); every
    try's record, in order; and the choices made, for the manifest."""

    chosen: Judged | None
    tries: list[Int8Try] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.chosen is not None and self.chosen.passed


def search(
    candidates: Sequence[Int8Recipe],
    pair: int,
    attempt: Attempt,
    rank: Rank,
    *,
    percentile: bool = False,
    trials: int = INT8_TRIALS,
) -> Search:
    """Try `candidates` and refine the closest (see the module doc)."""
    done = Search(None)

    def tried(recipe: Int8Recipe) -> Judged:
        judged = attempt(recipe)
        done.tries.append(judged.record)
        return judged

    judged: list[Judged] = []
    for recipe in candidates:
        judged.append(tried(recipe))
        if len(judged) >= pair and any(j.passed for j in judged):
            break
    done.chosen = _closest(judged)
    if done.chosen is None:
        return done
    if not done.passed and percentile and done.chosen.recipe.mode == "static" and len(done.tries) < trials:
        retry = tried(replace(done.chosen.recipe, method="percentile"))
        if retry.passed:
            done.why.append("percentile calibration (99.999%): minmax ranges left the verdict failing")
        done.chosen = _closest([done.chosen, retry])
    if not done.passed and len(done.tries) < trials:
        _keep_worst_float(done, tried, rank, trials)
    return done


def _keep_worst_float(done: Search, tried: Attempt, rank: Rank, trials: int) -> None:
    """Keep the chosen recipe's worst nodes float, 1, 2, 3, 4, 6, 9, ... of them, until one passes or the tries run
    out; the closest try stays chosen."""
    assert done.chosen is not None
    start = done.chosen
    try:
        ranking = rank(start)
    except ExportError as exc:
        done.why.append(f"no node kept float: ranking the quantized nodes failed ({exc.message})")
        return
    ranked = [name for name in ranking.nodes if name not in start.recipe.excluded]
    ranked = ranked[: int(len(ranking.nodes) * MAX_FLOAT_SHARE)]
    count = 1
    while ranked and len(done.tries) < trials:
        chosen = ranked[:count]
        judged = tried(start.recipe.excluding(chosen))
        done.chosen = _closest([done.chosen, judged])
        if judged.passed:
            shown = ", ".join(f"{n} adds {_db(ranking.errors[n])}" for n in chosen[:3])
            more = ", ..." if len(chosen) > 3 else ""
            done.why.append(f"{len(chosen)} nodes kept float, the worst by {ranking.measure} ({shown}{more})")
            return
        if count >= len(ranked):
            return
        count = min(max(count + 1, count * 3 // 2), len(ranked))


def _closest(judged: Sequence[Judged]) -> Judged | None:
    """The closest try that quantized (a passing one first; among equals the earlier)."""
    ran = [j for j in judged if j.report is not None]
    return min(ran, key=lambda j: j.record.closeness()) if ran else None


def decline(done: Search, speedups: dict[str, float], keep_slower: bool) -> str | None:
    """Why the variant is not written, in one line (None: it ships). `speedups`: fp32 time / INT8 time by batch."""
    if done.chosen is None:
        first = next((t.failures[0] for t in done.tries if t.failures), "no recipe tried")
        return f"{NAME} not written: ONNX Runtime's quantizer failed on every recipe tried ({first})"
    if not done.passed:
        best = done.chosen.record
        first = best.failures[:1]
        shown = [
            f"{label} {value:.4f}" for label, value in _closeness_figures(best) if not any(label in f for f in first)
        ]
        figures = ", ".join([*first, *shown])
        return (
            f"{NAME} not written: not accurate enough on the held-back inputs after {len(done.tries)} tries; the "
            f"closest, {best.recipe}: {figures}"
        )
    slower = {batch: ratio for batch, ratio in speedups.items() if ratio < 1.0}
    if slower and not keep_slower:
        lost = ", ".join(f"{ratio:.2f}x fp32 at {batch}" for batch, ratio in slower.items())
        return f"{NAME} not written: slower than fp32 on this CPU ({lost}); --keep-slower writes it anyway"
    return None


def _closeness_figures(record: Int8Try) -> list[tuple[str, float]]:
    figures = [("top-1 agreement", record.top1_agreement), ("cosine", record.cosine)]
    return [(label, value) for label, value in figures if value is not None]


def _db(share: float) -> str:
    """Noise added, as a share of the signal's power, in dB."""
    return f"noise at {10 * math.log10(share):.0f} dB" if share > 0 else "no noise"
