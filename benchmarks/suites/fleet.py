"""A fleet reading one repository: how long `rollout` takes to bring a new version to 1 and 3 servers (load, wait
ready, served parity on each) from S3-compatible object storage (moto_server) divided by the same from a local
folder, measured in the same run; and served throughput with 2 servers behind a client-side round robin vs 1.
On 2 cores extra servers share the same cores, so the round robin cannot scale here: it shows the overhead, not
the gain (on N machines it would approach N x one server for a compute-bound model)."""

from __future__ import annotations

import itertools
import tempfile
from contextlib import ExitStack
from pathlib import Path

from modelship.bench.measure import latency_notes, reference_outputs
from modelship.bench.report import Row
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import sender
from modelship.serve.load.stats import ratio
from modelship.serve.protocols import WireProtocol
from modelship.serve.rollout import Target, rollout
from modelship.serve.server import TritonServer

SUITE = "fleet"
FLEET_SIZES = (1, 3)


def run(ws: Workspace) -> list[Row]:
    try:
        from modelship.testing.object_store import moto_server
    except ImportError as exc:  # pragma: no cover - moto is a dev dependency
        return [Row(SUITE, "rollout", None, "", None, None, "", f"moto_server unavailable: {exc}")]
    key = ws.plan.small_model
    export = ws.export(key)
    folder = export.folder  # export-model's folder, golden data included: rollout proves each server with it
    model = f"{key}_onnx"
    rows = []
    with moto_server() as store, tempfile.TemporaryDirectory(prefix="modelship-fleet-") as tmp:
        repos = {"s3": store.url("fleet"), "folder": str(Path(tmp) / "repo")}
        for repo in repos.values():
            for version in (1, 2):
                _publish(folder, repo, key, version)
        for size in FLEET_SIZES:
            seconds = {kind: _rollout_seconds(ws, repo, model, folder, size) for kind, repo in repos.items()}
            rows.append(
                Row(SUITE, f"{key} rollout to {size} server{'s' * (size > 1)}", ratio(seconds["s3"], seconds["folder"]),
                    "rollout time, S3 repository / local folder", seconds["s3"], seconds["folder"], "s",
                    "load + ready + served parity on each server, one after another", better="lower")
            )  # fmt: skip
        rows.append(_round_robin(ws, repos["folder"], model, key))
    return rows


def _publish(folder: Path, repo: str, key: str, version: int) -> None:
    """Publish the export's ONNX artifact as `<key>_onnx` (the export folder may be named `<key>_fp16`)."""
    from modelship.serve.publish import PublishOptions
    from modelship.serve.s3_publish import publish_to

    publish_to(repo, folder, PublishOptions(name=key, artifacts=("onnx",), version=version, pipeline=None))


def _api_key(server: TritonServer) -> str:
    """The secret of a started server's repository API."""
    assert server.api_key_file is not None  # written when it started with its repository API
    return server.api_key_file.read_text().strip()


def _rollout_seconds(ws: Workspace, repo: str, model: str, folder: Path, size: int) -> float:
    """Seconds for `rollout` of version 2 to `size` servers that serve version 1 of `repo`."""
    ws.log(f"fleet: rollout to {size} server(s) from {repo.split('://')[0] if '://' in repo else 'a folder'}")
    with ExitStack() as stack:
        servers = [stack.enter_context(TritonServer(repo, explicit_models=[model])) for _ in range(size)]
        targets = [Target(s.http_url, _api_key(s)) for s in servers]
        rollout(model, 1, targets, folder)  # every server on version 1 first
        result = rollout(model, 2, targets, folder)
        if not result.ok:
            raise RuntimeError(f"fleet bench: rollout failed: {result.to_dict()}")
        return result.seconds


def _round_robin(ws: Workspace, repo: str, model: str, key: str) -> Row:
    """Throughput at concurrency 4, batch 1: 2 servers, each thread on one of them in turn, vs 1 server."""
    inputs = sample_inputs(ws.export(key), 1)
    outputs = reference_outputs(ws.export(key).artifact_path("onnx"), inputs)
    plan = ws.plan
    with ExitStack() as stack:
        servers = [stack.enter_context(TritonServer(repo, explicit_models=[model])) for _ in range(2)]
        ws.log("fleet: 1 server vs 2 servers round robin, concurrency 4")
        one = run_load(sender(servers[0].grpc_url, WireProtocol.GRPC, model, inputs, outputs), concurrency=4,
                       duration_s=plan.window_s, max_requests=plan.max_requests, warmup=2)  # fmt: skip
        turns = itertools.cycle(servers)
        two = run_load(lambda: sender(next(turns).grpc_url, WireProtocol.GRPC, model, inputs, outputs)(), concurrency=4,
                       duration_s=plan.window_s, max_requests=plan.max_requests, warmup=2)  # fmt: skip
    return Row(SUITE, f"{key} onnx b1 c4 grpc: 2 servers round robin / 1", ratio(two.throughput, one.throughput),
               "throughput, 2 servers / 1 server", two.throughput, one.throughput, "inf/s",
               f"{latency_notes(two)}; 2 cores shared by both servers: no gain possible here")  # fmt: skip
