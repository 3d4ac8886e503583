"""Startup: time from launching `tritonserver` to `/v2/health/ready` with the main model's ONNX and TorchScript
artifacts in the repository (each alone, then both), against loading the same files in-process and running the
one batch-1 inference that the published config's model_warmup runs. An empty repository gives the server's own
floor."""

from __future__ import annotations

import time

from modelship.bench.measure import reference_outputs
from modelship.bench.report import Row
from modelship.bench.stats import ratio
from modelship.bench.workspace import Export, Workspace, sample_inputs
from modelship.export.torchscript import jit_deprecation_silenced
from modelship.serve.server import TritonServer

SUITE = "startup"
REPOS = {"empty": (), "onnx": ("onnx",), "torchscript": ("torchscript",), "onnx+torchscript": ("onnx", "torchscript")}


def _load_onnx(export: Export) -> float:
    began = time.perf_counter()
    reference_outputs(export.artifact_path("onnx"), sample_inputs(export, 1))
    return time.perf_counter() - began


def _load_torchscript(export: Export) -> float:
    import torch

    began = time.perf_counter()
    with jit_deprecation_silenced():
        module = torch.jit.load(str(export.artifact_path("torchscript")), map_location="cpu")
    with torch.inference_mode():
        module(*(torch.from_numpy(a) for a in sample_inputs(export, 1).values()))
    return time.perf_counter() - began


def run(ws: Workspace) -> list[Row]:
    key = ws.plan.main_model
    export = ws.export(key)
    loads = {"onnx": _load_onnx(export), "torchscript": _load_torchscript(export)}
    rows = []
    for label, artifacts in REPOS.items():
        repo = ws.repo(f"{SUITE}-{label.replace('+', '-')}")
        for artifact in artifacts:
            ws.publish(repo, key, artifact)
        ws.log(f"startup: {label}")
        server = TritonServer(repo)
        try:
            server.start()
        finally:
            server.stop()
        baseline = sum(loads[a] for a in artifacts) or None
        rows.append(
            Row(
                SUITE,
                f"{key} {label}" if artifacts else "empty repository",
                ratio(server.startup_s, baseline),
                "server ready / in-process load + 1st run" if artifacts else "",
                server.startup_s,
                baseline,
                "s",
                "",
                {"artifacts": list(artifacts), "inprocess_s": {a: loads[a] for a in artifacts}},
            )
        )
    return rows
