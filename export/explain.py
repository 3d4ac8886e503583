"""`explain_artifact`: localise why one exported artifact fails parity (parity/localize.py), for
export-model's failure message and `modelship parity --explain`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from torch import nn

from modelship.contract.artifact_details import Int8Details, Int8Try, OnnxDetails
from modelship.contract.artifacts import EXPORT_FILES, VARIANTS, resolve_hook
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Artifact
from modelship.export.fp16 import FP16_ATTEMPTS, fp32_nodes
from modelship.export.torchscript import load_torchscript
from modelship.parity.fp16_ranges import FP16_TINY, emulate_fp16, name_nodes
from modelship.parity.localize import Explanation, localize_onnx, localize_torchscript


def explain_artifact(
    folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: dict[str, np.ndarray]
) -> Explanation:
    """The first module whose output differs, for the artifact file in `folder`, on one input set: as its variant
    says (contract.artifacts.Variant.explain: fp16 ONNX runs as float16 really computes), else compared as its
    format's fp32 artifact is."""
    variant = VARIANTS.get(artifact.name)
    if variant is not None and variant.explain is not None:
        explanation = resolve_hook(variant.explain)(folder, artifact, model, io, inputs)
    elif artifact.format == "onnx":
        proto = onnx.load(str(folder / artifact.file))
        explanation = localize_onnx(proto, model, io, inputs, artifact.precision, artifact.name)
    else:
        scripted = load_torchscript(folder / artifact.file)
        explanation = localize_torchscript(scripted, model, io, inputs, artifact.precision, artifact.name)
    if artifact.precision == "fp16":
        explanation.notes += _underflow_notes(model, io, inputs)
    return explanation


def explain_onnx_fp16(
    folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: dict[str, np.ndarray]
) -> Explanation:
    """An fp16 ONNX artifact localised as float16 really computes: its fp32 sibling `model.onnx`, rounded at every
    node boundary the artifact converted (a CPU run would hide float16's range)."""
    proto = onnx.load(str(folder / EXPORT_FILES["onnx"]))
    name_nodes(proto)
    details = artifact.details
    out_of_range = [k.node for k in details.kept_fp32_nodes] if isinstance(details, OnnxDetails) else []
    kept = fp32_nodes(proto, model, details.fp16_keep if details is not None else [], out_of_range)
    ops = dict(FP16_ATTEMPTS).get(_last_attempt(artifact), ())
    return localize_onnx(emulate_fp16(proto, kept, ops), model, io, inputs, artifact.precision, artifact.name)


def explain_onnx_int8(
    folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: dict[str, np.ndarray]
) -> Explanation:
    """INT8 changes every module's output by design, so no module is "the first that differs": the explanation is
    what the export's search tried and the closest it came (export.int8_strategy)."""
    details = artifact.details
    tries = details.tries if isinstance(details, Int8Details) else []
    if not tries:
        return Explanation(artifact.name, None, 0, ["INT8 is judged by the task's answer, not localised by module"])
    closest = min(tries, key=Int8Try.closeness)
    reached = f"{closest.recipe}: {', '.join(closest.failures) or 'passes'}"
    return Explanation(artifact.name, None, 0, [f"closest of {len(tries)} quantizations: {reached}"])


def _last_attempt(artifact: Artifact) -> str:
    details = artifact.details
    attempts = details.fp16_attempts if isinstance(details, OnnxDetails) else []
    return attempts[-1].reason if attempts else ""


def _underflow_notes(model: nn.Module, io: IOSpec, inputs: dict[str, np.ndarray]) -> list[str]:
    """A note per eager output that float16 cannot represent at all (every value below its smallest normal)."""
    import torch

    from modelship.contract.outputs import flatten_outputs

    with torch.inference_mode():
        result = model(*[torch.from_numpy(np.ascontiguousarray(inputs[t.name])) for t in io.inputs])
    notes = []
    for name, tensor in flatten_outputs(result):
        largest = float(tensor.abs().max()) if tensor.is_floating_point() and tensor.numel() else 0.0
        if 0 < largest < FP16_TINY:
            notes.append(
                f"output {name!r} is entirely below float16's smallest normal {FP16_TINY:.3g} (max |x| "
                f"{largest:.3g}): in float16 it underflows to zero, so cosine and top-k say nothing; scale the "
                "output, or keep its last module in fp32 with --fp16-keep"
            )
    return notes
