"""What a family's adapted model tells the export and the parity reference about itself, so that neither asks
which library built it. Every hook is optional, looked up on the module (or, for `scripting_context`, on any of its
submodules: an fp16 variant wraps the adapted model in casts); a model with none gets the default.

- `fp16_parts: list[str]`: the submodules an fp16 variant computes in float16 (a torchvision detector's backbone;
  its box decoding and NMS stay float32). Default: the whole model, `[""]`.
- `score_threshold: float`: the score below which the model drops its detections, recorded in the manifest.
  Default: None.
- `scripting_context() -> ContextManager`: entered around `torch.jit.script`, for operations the compiler reads
  then (a torchvision detector's box operations). Default: nothing.
- `reference_run(run, image) -> outputs`: the eager reference's outputs, given the function that runs the model on
  the set (`run()`) and its image input; adds reference-only tensors a compare function reads (a detector's
  candidate pool). Default: `run()`.
- `fusable_attention() -> FusableAttention`: the attention layout of a transformer encoder and a context in which it
  computes attention in the form ONNX Runtime's transformer optimizer fuses into its Attention op (transformers'
  eager attention; its SDPA export matches none of the optimizer's patterns). The INT8 variant of a text model is
  quantized from that fused graph (export.precision.int8.source). Default: None (quantized from the fp32 artifact).

Hooks that are methods are not called from `forward`, so TorchScript leaves them out; attributes are plain values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelship.contract.tensors import Tensors

if TYPE_CHECKING:
    from torch import Tensor, nn

    Outputs = Tensors


def fp16_parts(model: nn.Module) -> list[str]:
    """The submodules of `model` an fp16 variant computes in float16 (its `fp16_parts`, else all of it)."""
    parts = getattr(model, "fp16_parts", None)
    return list(parts) if parts is not None else [""]


def score_threshold(model: nn.Module) -> float | None:
    """The score threshold `model` applies to its detections, or None."""
    value = getattr(model, "score_threshold", None)
    return float(value) if value is not None else None


def scripting_context(model: nn.Module) -> contextlib.AbstractContextManager[Any]:
    """What to enter around scripting `model`: the first `scripting_context` of it or of a submodule."""
    hook = _first_hook(model, "scripting_context")
    return hook() if hook is not None else contextlib.nullcontext()


def _first_hook(model: nn.Module, name: str) -> Callable[[], Any] | None:
    """The hook `name` of `model` or, failing that, of its first submodule that has one."""
    return next((hook for module in model.modules() if (hook := getattr(module, name, None)) is not None), None)


def has_reference_run(model: Any) -> bool:
    """Whether `model` adds reference-only tensors to its eager outputs."""
    return callable(getattr(model, "reference_run", None))


def reference_run(model: Any, run: Callable[[], Outputs], image: Tensor) -> Outputs:
    """`model`'s eager outputs for a set (`run()`), with its reference-only tensors when it has a `reference_run`."""
    return model.reference_run(run, image) if has_reference_run(model) else run()


@dataclass(frozen=True)
class FusableAttention:
    """A transformer encoder's attention layout (what ONNX Runtime's optimizer is told) and `eager()`, entered around
    the export whose graph it fuses."""

    num_heads: int
    hidden_size: int
    eager: Callable[[], contextlib.AbstractContextManager[Any]]


def fusable_attention(model: nn.Module) -> FusableAttention | None:
    """The first `fusable_attention()` of `model` or of a submodule, or None."""
    hook = _first_hook(model, "fusable_attention")
    return hook() if hook is not None else None
