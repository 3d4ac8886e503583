"""How `--explain` localises an fp16 variant: the ONNX one as float16 really computes (its fp32 sibling rounded at
every node boundary it converted: a CPU run would hide float16's range), the TorchScript one by replaying its half
submodules; both add a note for any output float16 cannot represent at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from torch import nn

from modelship.contract.artifact_details import OnnxDetails
from modelship.contract.artifacts import EXPORT_FILES
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Artifact
from modelship.contract.tensors import Tensors
from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.export.precision.fp16.convert import FP16_ATTEMPTS, fp32_nodes
from modelship.export.precision.fp16.ranges import FP16_TINY, emulate_fp16
from modelship.parity.localize import Explanation, localize_onnx, localize_torchscript
from modelship.parity.onnx_graph import name_nodes


def explain_onnx_fp16(folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: Tensors) -> Explanation:
    """An fp16 ONNX artifact localised on the emulation of its own conversion (see the module doc)."""
    proto = onnx.load(str(folder / EXPORT_FILES["onnx"]))
    name_nodes(proto)
    details = artifact.details
    out_of_range = [k.node for k in details.kept_fp32_nodes] if isinstance(details, OnnxDetails) else []
    kept = fp32_nodes(proto, model, details.fp16_keep if details is not None else [], out_of_range)
    ops = dict(FP16_ATTEMPTS).get(_last_attempt(artifact), ())
    found = localize_onnx(emulate_fp16(proto, kept, ops), model, io, inputs, artifact.precision, artifact.name)
    found.notes += underflow_notes(model, io, inputs)
    return found


def explain_torchscript_fp16(
    folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: Tensors
) -> Explanation:
    """An fp16 TorchScript artifact: each half submodule replayed on eager's inputs for it."""
    scripted = load_torchscript(folder / artifact.file)
    found = localize_torchscript(scripted, model, io, inputs, artifact.precision, artifact.name)
    found.notes += underflow_notes(model, io, inputs)
    return found


def _last_attempt(artifact: Artifact) -> str:
    details = artifact.details
    attempts = details.fp16_attempts if isinstance(details, OnnxDetails) else []
    return attempts[-1].reason if attempts else ""


def underflow_notes(model: nn.Module, io: IOSpec, inputs: Tensors) -> list[str]:
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
