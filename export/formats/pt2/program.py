"""`--pt2`: torch.export's ExportedProgram (`model.pt2`) and an AOTInductor package compiled from it
(`model.aoti.pt2`), the path past TorchScript (deprecated in PyTorch; Triton's PyTorch backend loads AOTInductor
packages as `platform: "torch_aoti"` in releases after 24.10).

The batch axis and every other named axis are dynamic dims (`export.formats.onnx.graph.dynamic_shapes`, shared with
the dynamo ONNX exporter). A model torch.export rejects stops with the construct it rejected and what to change.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from modelship.contract.errors import ExportError
from modelship.contract.iospec import IOSpec
from modelship.contract.outputs import flatten_outputs
from modelship.export.formats.onnx.graph import dynamic_shapes, first_cause


class FlatOutputs(nn.Module):
    """The model with its outputs as a flat tuple in `flatten_outputs` order: named tuples and dicts of the model's
    own classes cannot be serialised by torch.export.save, and every runner maps outputs by position anyway."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(tensor for _, tensor in flatten_outputs(self.inner(*args)))


def export_program(model: nn.Module, example: tuple[torch.Tensor, ...], io: IOSpec) -> Any:
    """`torch.export.export` with the I/O spec's dynamic axes; ExportError naming what it rejected."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._export")
            return torch.export.export(FlatOutputs(model.eval()), example, dynamic_shapes=(dynamic_shapes(io),))
    except Exception as exc:  # Unsupported, UserError, GuardOnDataDependentSymNode, ConstraintViolationError, ...
        raise ExportError(
            f"torch.export rejected the model: {type(exc).__name__}: {first_cause(str(exc))}{_user_frame(str(exc))}",
            hint="a data-dependent branch or shape needs torch.cond or a shape-free rewrite; a Python-side effect "
            "or unsupported call needs rewriting (see PyTorch's exportdb); export without --pt2 meanwhile",
            details={"step": "torch_export", "exception": type(exc).__name__},
        ) from exc


def _user_frame(text: str) -> str:
    """` at FILE:LINE (code)`: the last frame of the model's own code in torch.export's message, if any."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s*(.+)', text)
    own = [f for f in frames if "site-packages" not in f[0] and "/torch/" not in f[0]]
    if not own:
        return ""
    file, line, code = own[-1]
    return f" at {file}:{line} ({code.strip()[:120]})"


def save_program(program: Any, path: Path) -> Any:
    """Save the ExportedProgram and load it back, so verification runs what was written; the runnable module."""
    try:
        torch.export.save(program, str(path))
    except Exception as exc:  # an output or input structure torch.export cannot serialise
        raise ExportError(
            f"torch.export could not save the program: {type(exc).__name__}: {first_cause(str(exc))}",
            hint="export without --pt2, or return tensors, tuples or dicts of tensors from forward",
            details={"step": "torch_export_save"},
        ) from exc
    return load_program(path)


def load_program(path: Path) -> nn.Module:
    return torch.export.load(str(path)).module()


def compile_aoti(program: Any, path: Path) -> Any:
    """AOTInductor package of `program` (C++ compiled with the system compiler), loaded back from `path`."""
    try:
        torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    except Exception as exc:  # inductor lowering or the C++ compiler failed
        raise ExportError(
            f"AOTInductor could not compile the exported program: {type(exc).__name__}: {first_cause(str(exc))}",
            hint="check that a C++ compiler (g++) is installed, or export without --pt2",
            details={"step": "aoti_compile"},
        ) from exc
    return load_aoti(path)


def load_aoti(path: Path) -> Any:
    return torch._inductor.aoti_load_package(str(path))
