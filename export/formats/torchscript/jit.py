"""TorchScript export: `torch.jit.script` by default, `torch.jit.trace` only when asked; save and reload from disk.

A scripting failure stops with its first real cause and where it is in the user's code, and names `--trace` as
the explicit alternative (tracing records one execution path and silently bakes in data-dependent control flow,
so it is never chosen automatically).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from modelship.checkpoint.families.model_hooks import scripting_context
from modelship.contract.errors import ExportError

_LOCATION = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


@contextlib.contextmanager
def jit_deprecation_silenced() -> Iterator[None]:
    """torch 2.9+ warns that torch.jit.* is deprecated (DeprecationWarning or FutureWarning by version). TorchScript
    is what Triton's LibTorch backend loads, so the export is deliberate: hide exactly that message."""
    with warnings.catch_warnings():
        for category in (DeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", message=r"`?torch\.jit\.\w+`? is deprecated", category=category)
        yield


def script_module(model: nn.Module) -> torch.jit.ScriptModule:
    """`torch.jit.script(model)`, or an ExportError naming the unsupported construct and its place. The model's own
    `scripting_context` is entered while compiling (a detector's box operations, as it runs them in every format)."""
    try:
        with jit_deprecation_silenced(), warnings.catch_warnings(), scripting_context(model):
            # the frontend reads every property of a transformers model, deprecated aliases included
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\.")
            return torch.jit.script(model)
    except Exception as exc:  # the frontend raises NotSupportedError, RuntimeError, torch.jit.Error, ...
        raise ExportError(
            f"torch.jit.script failed: {describe_script_error(exc)}",
            hint="rewrite that construct for TorchScript, or pass --trace to trace the model instead "
            "(tracing bakes in data-dependent control flow; it is checked at a second batch size)",
            details={"step": "script", "exception": type(exc).__name__},
        ) from exc


def describe_script_error(exc: BaseException) -> str:
    """The first line of a TorchScript frontend error plus `file:line` and the offending source line."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    cause = lines[0].strip().rstrip(":")
    for i, line in enumerate(lines):
        match = _LOCATION.search(line)
        if match:
            source = _offending_line(lines[i + 1 :])
            where = f"{match['file']}:{match['line']}"
            return f"{cause} at {where}" + (f" ({source})" if source else "")
    return cause


def _offending_line(block: list[str]) -> str:
    """The source line the frontend marks with `~~~ <--- HERE`, else the first code line shown."""
    for i, line in enumerate(block):
        if "<--- HERE" in line and i > 0:
            return block[i - 1].strip()
        if _LOCATION.search(line):
            break
    return block[1].strip() if len(block) > 1 else (block[0].strip() if block else "")


def trace_module(model: nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> tuple[torch.jit.ScriptModule, list]:
    """`torch.jit.trace` on one example batch; returns the module and the tracer's warnings (texts).

    torch's own trace check is off: it re-runs the same inputs and flags false positives (vit_b_16: "Graphs
    differed across invocations"); the pipeline instead compares against eager at other batch sizes.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        with jit_deprecation_silenced():
            try:
                traced = torch.jit.trace(model, example_inputs, check_trace=False, strict=False)
            except Exception as exc:
                raise ExportError(
                    f"torch.jit.trace failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                    details={"step": "trace"},
                ) from exc
    notes = sorted({str(w.message).splitlines()[0] for w in caught if issubclass(w.category, torch.jit.TracerWarning)})
    return traced, notes


def save_and_reload(module: torch.jit.ScriptModule, path: Path) -> torch.jit.ScriptModule:
    """Save to `path` and load it back (on CPU), so verification runs what was written."""
    with jit_deprecation_silenced():
        torch.jit.save(module, str(path))
    return load_torchscript(path)


def load_torchscript(path: Path) -> torch.jit.ScriptModule:
    """`torch.jit.load` on CPU (RuntimeError for a file that is not TorchScript)."""
    with jit_deprecation_silenced():
        return torch.jit.load(str(path), map_location="cpu")
