"""Roll a model version out to a fleet of Triton servers, proven right on each, withdrawn everywhere if not.

Built on Triton's own mechanisms: every server reads the same repository (object storage or a shared folder) in
explicit model-control mode, and this drives its repository API (behind the restricted-API secret header):

1. before anything changes, every server must answer as Triton and serve the model: its current config (and so
   its current versions) is recorded;
2. server by server (the first `canary` ones, then the rest): load version N (the model's config with
   `version_policy: specific [N]`, sent with the load request), wait until N is ready, then run served parity
   against the export's golden data with the artifact's tolerances;
3. all passed: done. Anything failed (load error, parity failure, timeout, server down): every server already
   changed is loaded again with the config it had before, and the rollout fails with a per-server table.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modelship.contract.errors import ClientError, ModelshipError, ServeError
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Manifest
from modelship.contract.parity_report import ParityReport
from modelship.contract.tensors import Tensors
from modelship.serve.client import TritonClient
from modelship.tasks import get_task


@dataclass(frozen=True)
class Target:
    """One server of the fleet: its HTTP URL and the repository-API secret it expects (None: API open)."""

    url: str
    api_key: str | None = None


@dataclass
class ServerOutcome:
    server: str
    previous: list[int] = field(default_factory=list)
    version: int | None = None
    load_s: float | None = None
    parity: str = "not run"  # "PASS", "FAIL: ...", "not run"
    error: str | None = None
    final: str = "unchanged"  # "serving N", "rolled back to [...]", "rollback failed: ...", "unchanged"


@dataclass
class RolloutResult:
    model: str
    version: int
    ok: bool
    servers: list[ServerOutcome]
    seconds: float

    def to_dict(self) -> JsonObject:
        return {
            "ok": self.ok,
            "model": self.model,
            "version": self.version,
            "seconds": round(self.seconds, 2),
            "servers": [asdict(s) for s in self.servers],
        }


def rollout(
    model: str,
    version: int,
    targets: list[Target],
    export_dir: Path,
    *,
    canary: int = 0,
    timeout_s: float = 120.0,
) -> RolloutResult:
    """Load `version` of `model` on every target, prove it with served parity against `export_dir`'s golden data,
    and keep it only if every server passed (see the module doc). Never raises for a server's failure: the result
    says what happened on each; ModelshipError only for bad arguments found before anything changed."""
    began = time.monotonic()
    if not targets:
        raise ServeError("no --server given", hint="name every server of the fleet with --server URL")
    if version < 1:
        raise ServeError(f"--version must be a positive integer, got {version}")
    golden = _golden(export_dir, model)
    clients = [_client(t, timeout_s) for t in targets]
    outcomes = [ServerOutcome(t.url) for t in targets]
    configs = [_current_config(c, model) for c in clients]
    for outcome, config in zip(outcomes, configs, strict=True):
        outcome.previous = _versions(config)
    order = list(range(len(targets)))
    waves = [order[:canary], order[canary:]] if 0 < canary < len(order) else [order]
    changed: list[int] = []
    ok = True
    for wave in waves:
        for index in wave:
            changed.append(index)
            if not _roll_one(clients[index], targets[index], model, version, configs[index], golden, outcomes[index],
                             timeout_s):  # fmt: skip
                ok = False
                break
        if not ok:
            break
    for index in changed:
        if ok:
            outcomes[index].final = f"serving {version}"
        else:
            _restore(clients[index], model, configs[index], outcomes[index], timeout_s)
    for client in clients:
        client.close()
    return RolloutResult(model, version, ok, outcomes, time.monotonic() - began)


def _roll_one(
    client: TritonClient,
    target: Target,
    model: str,
    version: int,
    config: JsonObject,
    golden: GoldenCheck,
    outcome: ServerOutcome,
    timeout_s: float,
) -> bool:
    outcome.version = version
    began = time.monotonic()
    try:
        _load(client, model, {**config, "version_policy": {"specific": {"versions": [version]}}})
        _wait_ready(client, model, version, timeout_s)
    except ModelshipError as exc:
        outcome.error = str(exc)
        return False
    outcome.load_s = round(time.monotonic() - began, 2)
    try:
        report = _served_parity(target, model, golden)
    except Exception as exc:  # the server went away mid-check (connection errors of any kind): an outcome
        outcome.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        outcome.parity = "FAIL: could not run"
        return False
    outcome.parity = "PASS" if report.passed else "FAIL: " + "; ".join(report.failures()[:2])
    return report.passed


def _restore(client: TritonClient, model: str, config: JsonObject, outcome: ServerOutcome, timeout_s: float) -> None:
    """Load the config the model had before the rollout (its versions with it)."""
    try:
        _load(client, model, config)
        for previous in outcome.previous:
            _wait_ready(client, model, previous, timeout_s)
        outcome.final = f"rolled back to {outcome.previous}"
    except ModelshipError as exc:
        outcome.final = f"rollback failed: {exc}"


@dataclass(frozen=True)
class GoldenCheck:
    """What a served model is proved against: the export's golden inputs and outputs, the precision of the
    artifact it serves (for its tolerances) and how its task compares each output."""

    inputs: list[Tensors]
    outputs: list[Tensors]
    precision: str
    kinds: dict[str, str]


def _golden(export_dir: Path, model: str) -> GoldenCheck:
    from modelship.parity import load_golden

    manifest = Manifest.read(export_dir)
    if not manifest.golden:
        raise ServeError(f"export {manifest.name!r} has no golden data", hint="re-export with export-model")
    precision = next((a.precision for a in manifest.artifacts if model.endswith(f"_{a.name}")), "fp32")
    inputs, outputs = load_golden(export_dir / manifest.golden)
    return GoldenCheck(inputs, outputs, precision, get_task(manifest.task).output_kinds(manifest.io))


def _served_parity(target: Target, model: str, golden: GoldenCheck) -> ParityReport:
    from modelship.parity import GoldenRunner, ToleranceConfig, compare_runners
    from modelship.serve.served_runner import TritonRunner

    runner = TritonRunner(target.url, model)
    try:
        reference = GoldenRunner(golden.inputs, golden.outputs, name="golden")
        tolerance = ToleranceConfig.for_precision(golden.precision)
        return compare_runners(reference, runner, golden.inputs, tolerance, kinds=golden.kinds)
    finally:
        runner.close()


def _client(target: Target, timeout_s: float) -> TritonClient:
    """A client of a server that answers as Triton; ServeError naming it otherwise."""
    client = TritonClient(target.url, api_key=target.api_key, timeout_s=timeout_s, concurrency=1)
    try:
        name = client.server_name()
    except ClientError as exc:
        client.close()
        raise ServeError(
            f"{target.url} does not answer as a Triton server ({exc.message})",
            hint="pass the HTTP address of a running tritonserver (http://host:8000)",
        ) from None
    if name != "triton":
        client.close()
        raise ServeError(f"{target.url} is not a Triton server (it says {name!r})")
    return client


def _current_config(client: TritonClient, model: str) -> JsonObject:
    try:
        return client.model_config(model)
    except ClientError as exc:
        raise ServeError(
            f"{client.url} does not serve model {model!r} ({exc.message[:160]})",
            hint="load the model on every server first (modelship serve --model NAME)",
        ) from None


def _failure(what: str, exc: ClientError) -> ServeError:
    """Why `what` failed (the client's message names the server and the step). A server that went away says so
    the way every client of the project does ("cannot reach a Triton server"), whichever step it died in."""
    if exc.details.get("unreachable"):
        return ServeError(
            f"{exc.message} while {what}",
            hint="the server stopped during the rollout; the servers already changed are rolled back",
        )
    return ServeError(exc.message[:300])


def _versions(config: JsonObject) -> list[int]:
    """The versions a config lets the server load (empty for 'latest'/'all' policies: the server decides)."""
    return [int(v) for v in config.get("version_policy", {}).get("specific", {}).get("versions", [])]


def _load(client: TritonClient, model: str, config: JsonObject) -> None:
    try:
        client.load(model, config)
    except ClientError as exc:
        raise _failure(f"loading {model}", exc) from None


def _wait_ready(client: TritonClient, model: str, version: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if client.model_ready(model, str(version)):
                return
        except ClientError as exc:
            raise _failure(f"waiting for {model} version {version} to load", exc) from None
        if time.monotonic() > deadline:
            raise ServeError(f"{client.url}: {model} version {version} not ready after {timeout_s:.0f} s")
        time.sleep(0.2)
