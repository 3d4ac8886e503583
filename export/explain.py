"""`explain_artifact`: localise why one exported artifact fails parity (parity/localize.py), for
export-model's failure message and `modelship parity --explain`."""

from __future__ import annotations

from pathlib import Path

import onnx
from torch import nn

from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Artifact
from modelship.contract.tensors import Tensors
from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.export.precision.registry import VARIANTS
from modelship.parity.localize import Explanation, localize_onnx, localize_torchscript


def explain_artifact(folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: Tensors) -> Explanation:
    """The first module whose output differs, for the artifact file in `folder`, on one input set: as its variant
    says (export.precision.registry.Variant.explain: fp16 ONNX runs as float16 really computes), else compared as
    its format's fp32 artifact is."""
    variant = VARIANTS.get(artifact.name)
    if variant is not None and variant.explain is not None:
        return variant.explain(folder, artifact, model, io, inputs)
    if artifact.format == "onnx":
        proto = onnx.load(str(folder / artifact.file))
        return localize_onnx(proto, model, io, inputs, artifact.precision, artifact.name)
    scripted = load_torchscript(folder / artifact.file)
    return localize_torchscript(scripted, model, io, inputs, artifact.precision, artifact.name)
