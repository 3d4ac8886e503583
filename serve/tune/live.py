"""The measurer that drives a real Triton: it loads each candidate through the repository API's load-with-config
override (recording the config first, serve.tune.restore), then measures with the project's load generator, window
after window until WINDOWS agree, the client's own CPU use measured beside them. Tuning a pipeline, it also points
the pipeline's step at the candidate's artifact (configs.repoint, from the pipeline as published) and measures
requests sent to the pipeline: its preprocessing or tokenization counts in every point."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from modelship.contract.errors import ClientError
from modelship.contract.json_object import JsonObject
from modelship.contract.tensors import Tensors
from modelship.serve.client import TritonClient
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import sender
from modelship.serve.load.stats import LoadStats
from modelship.serve.tune.configs import override, repoint
from modelship.serve.tune.measurement import CandidateRefused, Point, point_of, until_agreeing
from modelship.serve.tune.requests import request_inputs
from modelship.serve.tune.restore import Restorer
from modelship.serve.tune.space import Candidate

WINDOW_S = 1.0
WARMUP_S = 0.3


@dataclass
class LiveMeasurer:
    """Measures candidates of the models in `published` (artifact -> its config as the server had it; the first
    is the one `pipeline`, when given, steps into as published)."""

    client: TritonClient
    published: dict[str, JsonObject]
    restorer: Restorer
    window_s: float = WINDOW_S
    on_load: Callable[[Candidate], None] = lambda candidate: None
    loaded: dict[str, Candidate] = field(default_factory=dict)
    inputs: dict[str, Tensors] = field(default_factory=dict)
    measured: int = 0
    pipeline: JsonObject | None = None
    step: str = field(init=False)  # the artifact the pipeline steps into now

    def __post_init__(self) -> None:
        self.step = next(iter(self.published))

    def serve(self, candidate: Candidate) -> None:
        """Load `candidate`'s config unless its artifact already serves with it (and point the pipeline at it)."""
        if self.loaded.get(candidate.artifact) != candidate:
            self.on_load(candidate)
            self.restorer.remember(candidate.artifact, self.published[candidate.artifact])
            try:
                self.client.load(candidate.artifact, override(self.published[candidate.artifact], candidate))
            except ClientError as exc:
                self.loaded.pop(candidate.artifact, None)
                raise self._refused(candidate, exc) from None
            self.loaded[candidate.artifact] = candidate
        if self.pipeline is not None and self.step != candidate.artifact:
            self.restorer.remember(self.pipeline["name"], self.pipeline)
            first = next(iter(self.published))
            config = repoint(self.pipeline, self.published[first], self.published[candidate.artifact])
            try:
                self.client.load(self.pipeline["name"], config)
            except ClientError as exc:
                raise self._refused(candidate, exc, f"{self.pipeline['name']} over it") from None
            self.step = candidate.artifact

    @staticmethod
    def _refused(candidate: Candidate, exc: ClientError, what: str = "it") -> CandidateRefused:
        return CandidateRefused(f"{candidate.describe()}: the server did not load {what} ({exc.message[:200]})")

    def target(self, candidate: Candidate) -> str:
        """The model the requests go to: the pipeline, else the candidate's artifact."""
        return self.pipeline["name"] if self.pipeline is not None else candidate.artifact

    def measure(self, candidate: Candidate, concurrency: int) -> Point:
        self.serve(candidate)
        target = self.target(candidate)
        make = sender(
            self.client.url,
            self.client.protocol,
            target,
            self._inputs(target),
            {o.name: np.empty(0) for o in self.client.model(target).outputs},
        )
        began, cpu = time.perf_counter(), time.process_time()

        def window() -> LoadStats:
            return run_load(make, concurrency=concurrency, duration_s=self.window_s, warmup=1, warmup_s=WARMUP_S)

        try:
            windows, stable = until_agreeing(window)
        except Exception as exc:
            raise CandidateRefused(
                f"{candidate.describe()}: a request failed at {concurrency} clients ({exc})"
            ) from None
        self.measured += 1
        used = (time.process_time() - cpu) / max(time.perf_counter() - began, 1e-9)
        return point_of(candidate, windows, stable, used)

    def _inputs(self, model: str) -> Tensors:
        if model not in self.inputs:
            self.inputs[model] = request_inputs(self.client.model(model))
        return self.inputs[model]
