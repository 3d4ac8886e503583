"""Names, shapes and dtypes of a model's inputs and outputs: the contract every later step relies on.

A dimension is an int (fixed) or a name (dynamic, e.g. "batch", "sequence"). By convention a leading dimension
named "batch" on every input and output means the model batches along axis 0 (Triton's max_batch_size > 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from modelship.contract.dtypes import DTYPES
from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject

__all__ = ["BATCH", "DTYPES", "Dim", "IOSpec", "ServedNames", "TensorSpec"]
BATCH = "batch"

Dim = int | str


@dataclass(frozen=True)
class TensorSpec:
    """One named tensor. `value_range` (inclusive low, exclusive high) bounds generated test inputs."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str = "float32"
    value_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace(".", "").isalnum():
            raise UsageError(f"tensor name {self.name!r} is not a plain identifier", hint="use letters, digits, _")
        if self.dtype not in DTYPES:
            raise UsageError(f"tensor {self.name!r}: unknown dtype {self.dtype!r}", hint=f"use one of {DTYPES}")
        object.__setattr__(self, "shape", tuple(self.shape))
        for dim in self.shape:
            if isinstance(dim, bool) or not isinstance(dim, (int, str)) or (isinstance(dim, int) and dim < 1):
                raise UsageError(f"tensor {self.name!r}: bad dimension {dim!r}", hint="use a positive int or a name")
        if self.value_range is not None:
            object.__setattr__(self, "value_range", tuple(self.value_range))

    @property
    def dynamic_axes(self) -> dict[int, str]:
        return {i: d for i, d in enumerate(self.shape) if isinstance(d, str)}

    @property
    def batched(self) -> bool:
        return bool(self.shape) and self.shape[0] == BATCH

    def concrete_shape(self, sizes: dict[str, int]) -> tuple[int, ...]:
        """The shape with every named dimension replaced by `sizes[name]`."""
        try:
            return tuple(d if isinstance(d, int) else sizes[d] for d in self.shape)
        except KeyError as exc:
            raise UsageError(f"tensor {self.name!r}: no size given for dynamic dimension {exc.args[0]!r}") from None

    def with_dtype(self, dtype: str) -> TensorSpec:
        return TensorSpec(self.name, self.shape, dtype, self.value_range)

    def to_dict(self) -> JsonObject:
        out = asdict(self)
        out["shape"] = list(self.shape)
        if self.value_range is None:
            del out["value_range"]
        else:
            out["value_range"] = list(self.value_range)
        return out

    @classmethod
    def from_dict(cls, data: JsonObject) -> TensorSpec:
        vr = data.get("value_range")
        return cls(data["name"], tuple(data["shape"]), data.get("dtype", "float32"), tuple(vr) if vr else None)


@dataclass(frozen=True)
class IOSpec:
    """A model's inputs and outputs, in forward-argument and output order."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not self.inputs:
            raise UsageError("a model needs at least one input")
        names = [t.name for t in (*self.inputs, *self.outputs)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UsageError(f"input/output names must be unique, repeated: {', '.join(dupes)}")

    @property
    def batched(self) -> bool:
        """True when every input and output has a leading dynamic "batch" dimension."""
        return all(t.batched for t in (*self.inputs, *self.outputs))

    @property
    def max_rows(self) -> int | None:
        """1 when the model takes one row at a time (its batch axis fixed at 1: `single_row`), else None."""
        tensors = (*self.inputs, *self.outputs)
        return 1 if all(t.shape and t.shape[0] == 1 for t in tensors) else None

    def single_row(self) -> IOSpec:
        """The same I/O with the batch axis fixed at one row (for an exporter that unrolls a per-row loop)."""

        def fixed(specs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
            return tuple(replace(t, shape=(1, *t.shape[1:])) if t.batched else t for t in specs)

        return IOSpec(fixed(self.inputs), fixed(self.outputs))

    def to_dict(self) -> JsonObject:
        return {"inputs": [t.to_dict() for t in self.inputs], "outputs": [t.to_dict() for t in self.outputs]}

    @classmethod
    def from_dict(cls, data: JsonObject) -> IOSpec:
        return cls(
            tuple(TensorSpec.from_dict(t) for t in data["inputs"]),
            tuple(TensorSpec.from_dict(t) for t in data.get("outputs", [])),
        )


@dataclass(frozen=True)
class ServedNames:
    """How a served model names its tensors, mapped back to the I/O spec's names: {served name: spec name} for
    inputs and outputs, in order. Identity for ONNX; Triton's `INPUT__i` / `OUTPUT__i` for LibTorch. Publish writes
    it into the model config (`to_dict`), clients read it back (`from_dict`): one type on both sides."""

    inputs: dict[str, str]
    outputs: dict[str, str]

    @classmethod
    def identity(cls, inputs: Sequence[str], outputs: Sequence[str]) -> ServedNames:
        return cls({n: n for n in inputs}, {n: n for n in outputs})

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {"inputs": dict(self.inputs), "outputs": dict(self.outputs)}

    @classmethod
    def from_dict(cls, data: Any) -> ServedNames:
        """The mapping as written by `to_dict`; a ValueError for anything else."""
        if not isinstance(data, dict) or set(data) != {"inputs", "outputs"}:
            raise ValueError("expected {'inputs': {...}, 'outputs': {...}}")
        for part in data.values():
            if not isinstance(part, dict) or not all(isinstance(v, str) for kv in part.items() for v in kv):
                raise ValueError("expected string-to-string maps")
        return cls(dict(data["inputs"]), dict(data["outputs"]))
