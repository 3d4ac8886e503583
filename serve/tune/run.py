"""One tune, start to end, on a server a client reaches: recover what a killed tune left, find the model's
artifacts on the server, measure the published config, search, confirm the winner against the default, and put
every config back (serve.tune.restore), whatever happens; `tune_on` also reaches the server (serve.tune.local) and,
asked to, writes the winner into the repository and loads it from there (serve.tune.apply)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from modelship.contract.errors import ClientError, TuneError
from modelship.contract.json_object import JsonObject
from modelship.serve.client import TritonClient
from modelship.serve.tune.apply import apply_and_load, check_target
from modelship.serve.tune.concurrency import Evaluation
from modelship.serve.tune.configs import export_of, is_pipeline, published, steps
from modelship.serve.tune.confirm import Confirmation, confirm
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.live import WINDOW_S, LiveMeasurer
from modelship.serve.tune.local import Server, connected
from modelship.serve.tune.restore import Restorer, journal_path, recover
from modelship.serve.tune.search import HillClimb, Search, drive
from modelship.serve.tune.space import BATCH_SIZES, MAX_CONCURRENCY, Candidate, Space


@dataclass(frozen=True)
class TuneRequest:
    """What to tune and under which constraints; `cores`: the server's (the client's own when it runs beside it);
    `apply`: write the winner into the server's repository and load it from there (`tune_on`)."""

    model: str
    constraints: Constraints
    cores: int
    time_budget_s: float = 600.0
    max_concurrency: int = MAX_CONCURRENCY
    window_s: float = WINDOW_S
    apply: bool = False


@dataclass
class TuneResult:
    request: TuneRequest
    space: Space
    search: Search
    default: Evaluation
    confirmation: Confirmation | None
    recovered: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    seconds: float = 0.0
    pipeline: str | None = None  # the pipeline measured through (its step moved to each candidate's artifact)
    applied: list[str] = field(default_factory=list)  # the config.pbtxt files --apply wrote

    @property
    def winner(self) -> Evaluation:
        """The config to serve: the search's best when confirmed, else the default."""
        if self.confirmation is not None and self.confirmation.holds:
            return self.search.best
        return self.default

    @property
    def default_wins(self) -> bool:
        return self.winner is self.default

    @property
    def met(self) -> bool:
        """Whether the config to serve meets the constraints (its best point does)."""
        return self.winner.best is not None

    def require_met(self, report: str) -> None:
        """Refuse (TuneError) when no config met the constraints, naming the closest point on each; `report`:
        where every point measured was written."""
        if not self.met:
            raise self.request.constraints.unmet(self.request.model, self.search.points, report)

    def to_dict(self) -> JsonObject:
        winner = self.winner
        return {
            "ok": self.met,
            "model": self.request.model,
            "p99_budget_ms": self.request.constraints.p99_ms,
            "min_throughput": self.request.constraints.min_throughput,
            "cores": self.request.cores,
            "default": self.default.to_dict(),
            "winner": winner.to_dict(),
            "default_wins": self.default_wins,
            "ratio": round(self.confirmation.ratio, 3) if self.confirmation else 1.0,
            "confirmation": self.confirmation.to_dict() if self.confirmation else None,
            "candidates": len(self.search.evaluations),
            "points_measured": self.search.measured,
            "stopped": self.search.stopped,
            "skipped": {e.candidate.describe(): e.skipped for e in self.search.evaluations.values() if e.skipped},
            "points": [p.to_dict() for p in self.search.points],
            "recovered": self.recovered,
            "restored": self.restored,
            "seconds": round(self.seconds, 1),
            "pipeline": self.pipeline,
            "applied": self.applied,
        }


Progress = Callable[[str], None]


@dataclass(frozen=True)
class Served:
    """`configs`: the artifact tuned and the other artifacts of its export ready on the server (name -> config as
    served), the tuned one first; `batch_floor`: the largest max batch of a ready ensemble stepping into any of them
    (Triton refuses an ensemble whose batch is larger than a step's, so no candidate may go under it); `pipeline`:
    the config of the pipeline named, when tune measures through it (its step moves to the candidate's artifact)."""

    configs: dict[str, JsonObject]
    batch_floor: int = 0
    pipeline: JsonObject | None = None


def served_artifacts(client: TritonClient, model: str) -> Served:
    try:
        states = client.repository_index()
    except ClientError as exc:
        if exc.details.get("unreachable"):
            raise
        raise TuneError(
            f"{client.url} does not let tune load configs ({exc.message[:160]})",
            hint="pass its --api-key-file, or start it with `modelship serve` (explicit model control)",
        ) from None
    ready = [s.name for s in states if s.ready]
    if model not in ready:
        raise TuneError(f"{client.url} does not serve a ready model {model!r}", hint=f"ready: {', '.join(ready)}")
    everything = {name: client.model_config(name) for name in ready}
    pipeline = everything[model] if is_pipeline(everything[model]) else None
    artifact = _artifact_of(model, everything)
    export = export_of(everything[artifact])
    configs = {artifact: everything[artifact]}
    configs |= {
        name: config
        for name, config in everything.items()
        if export is not None and export_of(config) == export and not is_pipeline(config)
    }
    floors = [
        int(config.get("max_batch_size", 0))
        for config in everything.values()
        if any(step in configs for step in steps(config))
    ]
    return Served(configs, max(floors, default=0), pipeline)


def _artifact_of(model: str, everything: dict[str, JsonObject]) -> str:
    """`model`, or the artifact the pipeline `model` steps into (the step modelship published from an export)."""
    if not is_pipeline(everything[model]):
        return model
    found = [s for s in steps(everything[model]) if s in everything and export_of(everything[s]) is not None]
    if not found:
        raise TuneError(
            f"{model} is a pipeline over no ready model published by modelship",
            hint=f"its steps: {', '.join(steps(everything[model]))}; load them, or tune the model it serves",
        )
    return found[0]


@dataclass
class Session:
    """What one tune measures with: the space of the model's artifacts on this server, the published config it
    starts from, the live measurer and the restorer holding every config it changed."""

    space: Space
    start: Candidate
    measurer: LiveMeasurer
    restorer: Restorer
    recovered: list[str]
    pipeline: str | None = None


def open_session(client: TritonClient, request: TuneRequest, progress: Progress, space: Space | None = None) -> Session:
    """Recover what a killed tune left, then find the model's artifacts (`space`: a grid of the caller's instead
    of the default one over them; either way without the batch sizes a loaded pipeline forbids)."""
    journal = journal_path(client.url)
    recovered = recover(client, journal)
    if recovered:
        progress(f"restored the configs a killed tune left: {', '.join(recovered)}")
    served = served_artifacts(client, request.model)
    artifact = next(iter(served.configs))
    start = published(artifact, served.configs[artifact], request.cores)
    if space is None:
        batches = tuple(sorted({*BATCH_SIZES, start.max_batch_size}))
        space = Space(tuple(served.configs), request.cores, batches, max_concurrency=request.max_concurrency)
        if not start.max_batch_size:  # a model without a batch axis: no batcher to tune
            space = replace(space, batch_sizes=(0,), queue_delays_us=(start.queue_delay_us,))
    if served.batch_floor:
        # loading a step with a smaller batch would take the pipeline down: Triton refuses the ensemble then
        kept = tuple(b for b in space.batch_sizes if b >= served.batch_floor) or (served.batch_floor,)
        space = replace(space, batch_sizes=kept)
        progress(f"largest batch kept at {served.batch_floor} or more: a loaded pipeline batches that many")
    restorer = Restorer(client, journal)
    measurer = LiveMeasurer(client, served.configs, restorer, request.window_s, pipeline=served.pipeline)
    measurer.loaded[artifact] = start
    return Session(space, start, measurer, restorer, recovered, served.pipeline["name"] if served.pipeline else None)


def tune_on(server: Server, request: TuneRequest, progress: Progress = lambda line: None) -> TuneResult:
    """`tune` on the server `server` names; with `request.apply`, then the winner written into its repository and
    loaded from there (nothing changes when the default wins)."""
    if request.apply:
        check_target(server.repo, request.model)
    with connected(server, request.model, progress) as client:
        result = tune(client, request, progress)
        if request.apply and not result.default_wins:
            winner = result.winner.candidate
            result.applied = apply_and_load(client, server.repo, winner, result.pipeline, progress)
    return result


def tune(client: TritonClient, request: TuneRequest, progress: Progress = lambda line: None) -> TuneResult:
    began = time.monotonic()
    session = open_session(client, request, progress)
    deadline = began + request.time_budget_s

    def report(search: Search) -> None:
        if search.latest.skipped:
            progress(f"skipped {search.latest.skipped}")
        best = search.best
        left = max(0.0, deadline - time.monotonic())
        progress(
            f"{len(search.evaluations)} configs, {search.measured} points; best {best.throughput:.1f}/s "
            f"({best.candidate.describe()}); {left / 60:.1f} min left"
        )

    try:
        search = drive(
            HillClimb(session.space, session.start, request.constraints),
            session.measurer.measure,
            should_stop=lambda: "time budget spent" if time.monotonic() > deadline else None,
            progress=report,
        )
        default = search.evaluations[session.start]
        confirmation = _confirm(session.measurer, search, default, request.constraints, progress)
    finally:
        restored = session.restorer.restore()
    return TuneResult(
        request, session.space, search, default, confirmation, session.recovered, restored, time.monotonic() - began,
        session.pipeline,
    )  # fmt: skip


def _confirm(
    measurer: LiveMeasurer, search: Search, default: Evaluation, constraints: Constraints, progress: Progress
) -> Confirmation | None:
    best = search.best
    if best.candidate == default.candidate or best.best is None:
        return None
    baseline = default.best or min(default.points, key=lambda p: p.p99_ms, default=None)
    if baseline is None:
        return None
    progress(f"confirming {best.candidate.describe()} against the default, interleaved")
    return confirm(measurer.measure, baseline, best.best, constraints)
