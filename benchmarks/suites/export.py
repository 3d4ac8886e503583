"""Export pipeline: `export-model`'s work for the main model (load checkpoint, TorchScript, ONNX, fp16, parity
verification of every artifact), step by step, against the bare library calls doing the same job in the same
process: torch.load + load_state_dict, torch.jit.script + save + load, torch.onnx.export, onnxruntime's fp16
converter + onnx.save, and for each verification an ONNX Runtime session (or the loaded module) + one run per input
set. The ratio is the overhead the tool adds (checks, metadata, comparisons, the fp16 range pass and emulated
verification, crash isolation, atomic writes); the pipeline overlaps TorchScript verification with the ONNX
export, so per-step rows of overlapping steps include the contention and `end to end` is the figure to read.
Exporters are warmed up on a tiny module first so that neither side pays one-time import costs."""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np

from modelship.bench.report import Row
from modelship.bench.workspace import Export, Workspace
from modelship.contract.artifact_details import OnnxDetails
from modelship.export.formats.torchscript.jit import jit_deprecation_silenced
from modelship.serve.load.stats import ratio

SUITE = "export"
VERIFY_BATCHES = (1, 7)  # the pipeline's default verification batch sizes


def _timed(work: Callable[[], object]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def _warm_up(folder: Path) -> None:
    import torch

    tiny = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    example = (torch.randn(2, 3, 8, 8),)
    batch = torch.export.Dim("batch", min=1)
    with jit_deprecation_silenced():
        torch.jit.script(tiny)
    path = str(folder / "warm.onnx")
    torch.onnx.export(tiny, example, path, dynamo=True, dynamic_shapes=({0: batch},), verbose=False)


def bare_steps(export: Export, folder: Path) -> dict[str, float]:
    """Seconds of the bare library calls equivalent to each pipeline step, keyed like the pipeline's steps."""
    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.transformers import float16

    from modelship.checkpoint.arch import build_model

    spec = export.manifest.io.inputs[0]
    rng = np.random.default_rng(0)
    dims = cast(tuple[int, ...], spec.shape[1:])  # the bench's image model: every dim but the batch is static
    sets = [rng.standard_normal((b, *dims), dtype=np.float32) for b in VERIFY_BATCHES]
    model = export.eager
    seconds: dict[str, float] = {}

    def load() -> None:
        net = build_model(export.model.arch)
        net.load_state_dict(torch.load(export.checkpoint, weights_only=True))

    def run_torch(module: torch.nn.Module, half: bool = False) -> None:
        with torch.inference_mode():
            for array in sets:
                tensor = torch.from_numpy(array)
                module(tensor.half() if half else tensor)

    def script(module: torch.nn.Module, path: Path) -> torch.jit.ScriptModule:
        with jit_deprecation_silenced():
            torch.jit.save(torch.jit.script(module), str(path))
            return torch.jit.load(str(path), map_location="cpu")

    def session_and_run(path: Path, **extra: object) -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"], **extra)
        for array in sets:
            session.run(None, {spec.name: array})

    seconds["load"] = _timed(load)
    seconds["reference"] = _timed(lambda: run_torch(model))
    names = {a.name for a in export.manifest.artifacts}
    if "torchscript" in names:
        loaded: list = []
        seconds["script torchscript"] = _timed(lambda: loaded.append(script(model, folder / "bare.pt")))
        seconds["verify torchscript"] = _timed(lambda: run_torch(loaded[0]))
    if "torchscript_fp16" in names:
        loaded_half: list = []
        half = copy.deepcopy(model).half().eval()
        seconds["script torchscript_fp16"] = _timed(lambda: loaded_half.append(script(half, folder / "bare16.pt")))
        seconds["verify torchscript_fp16"] = _timed(lambda: run_torch(loaded_half[0], half=True))
    onnx_path = folder / "bare.onnx"
    details = export.manifest.artifact("onnx").details
    assert isinstance(details, OnnxDetails)  # an onnx artifact's details, as the manifest reads them back
    opset = details.opset
    batch = torch.export.Dim("batch", min=1)
    example = (torch.from_numpy(sets[1][:2]),)
    seconds["export onnx"] = _timed(
        lambda: torch.onnx.export(
            model, example, str(onnx_path), dynamo=True, dynamic_shapes=({0: batch},), opset_version=opset,
            optimize=True, verbose=False, input_names=[spec.name],
        )
    )  # fmt: skip
    seconds["verify onnx"] = _timed(lambda: session_and_run(onnx_path))
    if "onnx_fp16" in names:
        fp16_path = folder / "bare.fp16.onnx"

        def convert() -> None:
            onnx.save(float16.convert_float_to_float16(onnx.load(str(onnx_path)), keep_io_types=True), str(fp16_path))

        seconds["convert onnx_fp16"] = _timed(convert)
        seconds["verify onnx_fp16"] = _timed(
            lambda: session_and_run(export.artifact_path("onnx_fp16"), disabled_optimizers=["NchwcTransformer"])
        )
    return seconds


def tool_steps(export: Export, steps: list[str]) -> dict[str, float]:
    """The pipeline's seconds for the same steps (from its manifest timings); "load" is the project's loader."""
    out = {"load": export.load_seconds, "reference": export.step_seconds("reference")}
    for step in steps:
        if step not in out:
            out[step] = export.step_seconds(step)
    return out


def run(ws: Workspace) -> list[Row]:
    key = ws.plan.main_model
    with tempfile.TemporaryDirectory(prefix="modelship-bench-") as tmp:
        ws.log("export: warming up exporters")
        _warm_up(Path(tmp))
        export = ws.export(key, fp16=True)
        ws.log(f"export: bare library calls for {key}")
        bare = bare_steps(export, Path(tmp))
    tool = tool_steps(export, list(bare))
    rows = [
        Row(SUITE, f"{key} {step}", ratio(tool[step], bare[step]), "tool / bare library calls", tool[step], bare[step],
            "s", better=None)  # one step, measured once: a detail, `end to end` is judged
        for step in bare
    ]  # fmt: skip
    verify = [s for s in bare if s.startswith("verify")]
    parity_tool, parity_bare = sum(tool[s] for s in verify), sum(bare[s] for s in verify)
    rows.append(
        Row(SUITE, f"{key} parity (all verify steps)", ratio(parity_tool, parity_bare),
            "parity run / its bare inference calls", parity_tool, parity_bare, "s", f"batches {VERIFY_BATCHES}",
            better="lower")
    )  # fmt: skip
    total_bare = sum(bare.values())
    rows.append(
        Row(SUITE, f"{key} end to end", ratio(export.seconds, total_bare), "tool / bare library calls",
            export.seconds, total_bare, "s", "TorchScript + ONNX + fp16 + verification",
            {"tool_steps": [t.to_dict() for t in export.timings], "bare_steps": bare, "load_s": export.load_seconds},
            better="lower")
    )  # fmt: skip
    return rows
