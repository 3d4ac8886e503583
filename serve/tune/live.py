"""The measurer that drives a real Triton: it loads each candidate through the repository API's load-with-config
override (recording the config first, serve.tune.restore), then measures with the project's load generator, window
after window until WINDOWS agree, the client's own CPU use measured beside them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from modelship.contract.errors import ClientError, TuneError
from modelship.contract.json_object import JsonObject
from modelship.serve.client import TritonClient
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import sender
from modelship.serve.load.stats import LoadStats
from modelship.serve.tune.configs import override
from modelship.serve.tune.measurement import Point, point_of, until_agreeing
from modelship.serve.tune.requests import request_inputs
from modelship.serve.tune.restore import Restorer
from modelship.serve.tune.space import Candidate

WINDOW_S = 1.0
WARMUP_S = 0.3


class CandidateRefused(TuneError):
    """The server would not load a candidate config (it keeps serving the one it had)."""


@dataclass
class LiveMeasurer:
    """Measures candidates of the models in `published` (artifact -> its config as the server had it)."""

    client: TritonClient
    published: dict[str, JsonObject]
    restorer: Restorer
    window_s: float = WINDOW_S
    on_load: Callable[[Candidate], None] = lambda candidate: None
    loaded: dict[str, Candidate] = field(default_factory=dict)
    inputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    measured: int = 0

    def serve(self, candidate: Candidate) -> None:
        """Load `candidate`'s config unless its artifact already serves with it."""
        if self.loaded.get(candidate.artifact) == candidate:
            return
        self.on_load(candidate)
        self.restorer.remember(candidate.artifact, self.published[candidate.artifact])
        try:
            self.client.load(candidate.artifact, override(self.published[candidate.artifact], candidate))
        except ClientError as exc:
            self.loaded.pop(candidate.artifact, None)
            raise CandidateRefused(
                f"{candidate.describe()}: the server did not load it ({exc.message[:200]})"
            ) from None
        self.loaded[candidate.artifact] = candidate

    def measure(self, candidate: Candidate, concurrency: int) -> Point:
        self.serve(candidate)
        inputs = self._inputs(candidate.artifact)
        make = sender(
            self.client.url,
            self.client.protocol.value,
            candidate.artifact,
            inputs,
            {o.name: np.empty(0) for o in self.client.model(candidate.artifact).outputs},
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

    def _inputs(self, artifact: str) -> dict[str, np.ndarray]:
        if artifact not in self.inputs:
            self.inputs[artifact] = request_inputs(self.client.model(artifact))
        return self.inputs[artifact]
