"""Cost growth: how export time, parity time and served latency grow with model size (resnet18 -> 50 -> 101,
vit_tiny -> vit_b_16) and with batch size (main model, batch 1 -> 64). Served latency is batch-1 (or batch-b)
p50 over gRPC at concurrency 1, next to in-process ONNX Runtime p50 on the same inputs. `plot` draws the rows."""

from __future__ import annotations

import dataclasses

from modelship.bench.measure import InProcess, served
from modelship.bench.report import Row
from modelship.bench.stats import ratio
from modelship.bench.workspace import Workspace, sample_inputs
from modelship.serve.server import TritonServer

SUITE = "growth"
WINDOW_SHARE = 0.5  # growth points are many; each gets half the plan's load window
EXPORT_STEPS = ("script torchscript", "export onnx")
PARITY_STEPS = ("verify torchscript", "verify onnx")


def run(ws: Workspace) -> list[Row]:
    plan = dataclasses.replace(ws.plan, window_s=ws.plan.window_s * WINDOW_SHARE)
    repo = ws.repo(SUITE)
    main = ws.plan.main_model
    points = []  # (axis, key, batch, model name)
    for key in plan.growth_models:
        points.append(("model", key, 1, ws.publish(repo, key)))
    batched = ws.publish(repo, main, name_suffix="_b64", max_batch_size=max(plan.growth_batches))
    points.extend(("batch", main, b, batched) for b in plan.growth_batches)
    baselines = {}
    for axis, key, batch, _ in points:  # in-process first, while no server competes for the cores
        export = ws.export(key)
        inputs = sample_inputs(export, batch)
        ws.log(f"growth: in-process {key} batch {batch}")
        with InProcess(export.artifact_path("onnx")) as runner:
            baselines[axis, key, batch] = (inputs, runner.outputs(inputs), runner.measure(inputs, plan))
    rows = []
    with TritonServer(repo) as server:
        for axis, key, batch, name in points:
            inputs, outputs, base = baselines[axis, key, batch]
            ws.log(f"growth: served {key} batch {batch}")
            stats = served(server, "grpc", name, inputs, outputs, plan)
            export = ws.export(key)
            export_s = sum(export.step_seconds(s) for s in EXPORT_STEPS)
            parity_s = sum(export.step_seconds(s) for s in PARITY_STEPS)
            data = {
                "axis": axis,
                "model": key,
                "batch": batch,
                "params_m": round(export.params_m, 2),
                "export_s": export_s,
                "parity_s": parity_s,
                "served_ms": stats.p50_ms,
                "inprocess_ms": base.p50_ms,
                "served": stats.to_dict(),
                "inprocess": base.to_dict(),
            }
            notes = f"{export.params_m:.1f} M params; export {export_s:.1f} s, parity {parity_s:.1f} s"
            rows.append(
                Row(
                    SUITE,
                    f"{key} b{batch} c1 grpc" + (" (size)" if axis == "model" else " (batch)"),
                    ratio(stats.p50_ms, base.p50_ms),
                    "served / in-process p50 latency",
                    stats.p50_ms,
                    base.p50_ms,
                    "ms",
                    notes if axis == "model" else "",
                    data,
                )
            )
    return rows
