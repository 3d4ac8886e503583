"""Work out a model's input and output specs: from `--input` flags, checkpoint metadata or the architecture.

Inputs, first match wins: `--input` flags; the checkpoint's metadata "io"; an image input shaped from the model
itself (its `image_size` attribute, else its model family's: timm `pretrained_cfg["input_size"]`, torchvision's
default weights' crop size; else 224), with the channel count of the first convolution. Input names default to
forward()'s argument names.

Outputs are found by running the model: names by `contract.outputs.flatten_outputs`, and every output dimension that
changes when one dynamic input axis changes gets that axis' name (or `<output>_<axis>` when it changes with the
axis without equalling it, e.g. a downsampled feature map).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from modelship.contract.errors import ExportError, UsageError
from modelship.contract.iospec import BATCH, DTYPES, IOSpec, TensorSpec
from modelship.contract.outputs import flatten_outputs
from modelship.contract.preprocessing import PreprocessSpec
from modelship.parity.inputs import DEFAULT_DIM_SIZE, random_inputs

DEFAULT_IMAGE_SIZE = 224
IMAGE_AXES = ("channels", "height", "width")
DISCOVERY_BATCH = (2, 3)  # batch sizes of the output-discovery runs (not 1: some models squeeze a batch of 1)


class InputSource(StrEnum):
    """Where the input specs came from: `--input` flags, the checkpoint's metadata, or the architecture (an image
    input shaped from the model itself)."""

    FLAG = "flag"
    METADATA = "metadata"
    ARCHITECTURE = "architecture"


@dataclass(frozen=True)
class ResolvedInputs:
    """Input specs plus a representative size for every named (dynamic) dimension."""

    inputs: tuple[TensorSpec, ...]
    sizes: dict[str, int] = field(default_factory=dict)
    source: InputSource = InputSource.FLAG

    @property
    def dynamic_axes(self) -> tuple[str, ...]:
        """Named dimensions in order of first appearance, "batch" first when present."""
        names = dict.fromkeys(d for spec in self.inputs for d in spec.shape if isinstance(d, str))
        return tuple(sorted(names, key=lambda n: n != BATCH))

    def second_size(self, axis: str) -> int:
        """A second size for a non-batch axis, different from its representative size, to prove it dynamic."""
        size = self.sizes.get(axis, DEFAULT_DIM_SIZE)
        return size + 1 if size <= 2 else size - max(1, size // 4)


class InputOption(NamedTuple):
    """One parsed `--input`: the tensor and the example sizes it gives its named axes."""

    spec: TensorSpec
    sizes: dict[str, int]


def parse_input_option(text: str) -> InputOption:
    """Parse `name:dims:dtype[:low..high]`, dims comma-separated ints or axis names, a name optionally with
    `=size` for its example size: `input_ids:batch,sequence=32:int64:0..30522`."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 4:
        raise UsageError(
            f"--input {text!r}: expected name:dims[:dtype[:low..high]]",
            hint="e.g. --input input_ids:batch,sequence:int64:0..1000",
        )
    name, dims_text = parts[0], parts[1]
    dtype = parts[2] if len(parts) > 2 and parts[2] else "float32"
    value_range = _parse_range(text, parts[3]) if len(parts) == 4 else None
    shape: list[int | str] = []
    sizes: dict[str, int] = {}
    for dim in filter(None, (d.strip() for d in dims_text.split(","))):
        axis, _, size = dim.partition("=")
        if axis.isdigit():
            shape.append(int(axis))
            continue
        if not axis.replace("_", "").isalnum() or axis[0].isdigit():
            raise UsageError(f"--input {text!r}: bad dimension {dim!r}", hint="use an int or an axis name")
        shape.append(axis)
        if size:
            if not size.isdigit() or int(size) < 1:
                raise UsageError(f"--input {text!r}: bad size in {dim!r}", hint="write axis=N with N >= 1")
            sizes[axis] = int(size)
    if dtype not in DTYPES:
        raise UsageError(f"--input {text!r}: unknown dtype {dtype!r}", hint=f"use one of {', '.join(DTYPES)}")
    return InputOption(TensorSpec(name, tuple(shape), dtype, value_range), sizes)


def _parse_range(text: str, range_text: str) -> tuple[float, float]:
    low, sep, high = range_text.partition("..")
    try:
        if not sep:
            raise ValueError
        return float(low), float(high)
    except ValueError:
        raise UsageError(f"--input {text!r}: bad value range {range_text!r}", hint="write low..high") from None


def parse_axes(text: str | None) -> tuple[str, ...]:
    """`--dynamic height,width` -> ("height", "width")."""
    return tuple(a.strip() for a in (text or "").split(",") if a.strip())


def forward_input_names(model: nn.Module) -> list[str]:
    """forward()'s required positional parameter names (those an exported graph takes as inputs); parameters with
    defaults (timm's `attn_mask=None`, `is_causal=False`) keep their defaults."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [
        p.name
        for p in inspect.signature(model.forward).parameters.values()
        if p.kind in kinds and p.default is inspect.Parameter.empty
    ]


def resolve_inputs(
    model: nn.Module,
    *,
    arch: str | None = None,
    io: IOSpec | None = None,
    preprocess: PreprocessSpec | None = None,
    input_options: Sequence[InputOption | str] = (),
    dynamic: Sequence[str] = (),
) -> ResolvedInputs:
    """Input specs with "batch" leading every input, plus `dynamic` axes made dynamic (see module doc); `io` is the
    checkpoint metadata's."""
    if input_options:
        parsed = [parse_input_option(o) if isinstance(o, str) else o for o in input_options]
        resolved = ResolvedInputs(
            tuple(spec for spec, _ in parsed), {k: v for _, s in parsed for k, v in s.items()}, InputSource.FLAG
        )
    elif io is not None:
        resolved = ResolvedInputs(io.inputs, {}, InputSource.METADATA)
    else:
        resolved = _image_inputs(model, arch, preprocess)
    return _apply_dynamic(resolved, dynamic, len(forward_input_names(model)))


def _image_inputs(model: nn.Module, arch: str | None, preprocess: PreprocessSpec | None) -> ResolvedInputs:
    names = forward_input_names(model)
    if len(names) != 1:
        raise UsageError(
            f"cannot guess the inputs of {type(model).__name__}.forward({', '.join(names)})",
            hint="describe each input with --input name:dims:dtype, e.g. --input x:batch,3,224,224:float32",
        )
    channels = next((m.in_channels for m in model.modules() if isinstance(m, nn.Conv2d)), None)
    if channels is None:
        raise UsageError(
            f"{type(model).__name__} is not an image model (no Conv2d) and has no 'io' metadata",
            hint="describe its input with --input, e.g. --input x:batch,128:float32",
        )
    height, width = image_size(model, arch, preprocess)
    shape = (BATCH, channels, height, width)
    # pixels left in [0, 1] (a detector normalises inside) are tested in [0, 1]; normalised ones as N(0, 1)
    unit = preprocess is not None and preprocess.unnormalised
    image = TensorSpec(names[0], shape, value_range=(0.0, 1.0) if unit else None)
    return ResolvedInputs((image,), {"height": height, "width": width}, InputSource.ARCHITECTURE)


def image_size(model: nn.Module, arch: str | None, preprocess: PreprocessSpec | None = None) -> tuple[int, int]:
    """(height, width) the model expects: its own `image_size` attribute (torchvision's VisionTransformer), the crop
    of the checkpoint's own preprocessing spec, its model family's (timm's pretrained_cfg, torchvision's weights),
    else 224."""
    from modelship.checkpoint.families import family_of

    own = getattr(model, "image_size", None)
    if isinstance(own, int):
        return own, own
    if preprocess is not None and preprocess.output_hw:
        return preprocess.output_hw
    known = family_of(arch).input_size(model, arch) if arch else None
    return known or (DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE)


def _apply_dynamic(resolved: ResolvedInputs, dynamic: Sequence[str], forward_arity: int) -> ResolvedInputs:
    """Lead every input with "batch" unless it already has it, and rename image axes listed in `dynamic`."""
    if len(resolved.inputs) > forward_arity:
        raise UsageError(
            f"{len(resolved.inputs)} inputs described but forward() takes {forward_arity}",
            hint="give one --input per forward() argument",
        )
    wanted = set(dynamic)
    inputs = []
    sizes = dict(resolved.sizes)
    for spec in resolved.inputs:
        shape = list(spec.shape)
        if shape and shape[0] != BATCH:
            raise UsageError(
                f"input {spec.name!r}: the first dimension must be 'batch', got {shape[0]!r}",
                hint="modelship exports batched models: write batch as the first dimension",
            )
        if resolved.source is InputSource.ARCHITECTURE:
            for axis in wanted & {"height", "width"}:
                shape[1 + IMAGE_AXES.index(axis)] = axis
        inputs.append(TensorSpec(spec.name, tuple(shape), spec.dtype, spec.value_range))
    named = {d for spec in inputs for d in spec.shape if isinstance(d, str)}
    unknown = sorted(wanted - named)
    if unknown:
        raise UsageError(
            f"--dynamic {', '.join(unknown)}: no input has such an axis",
            hint=f"axes: {', '.join(sorted(named))}; name axes with --input name:batch,sequence:dtype",
        )
    if resolved.source is InputSource.ARCHITECTURE:
        sizes = {k: v for k, v in sizes.items() if k in named}
    return ResolvedInputs(tuple(inputs), sizes, resolved.source)


def torch_inputs(io: IOSpec, sizes: dict[str, int], seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded example tensors in forward-argument order (the parity engine's generator, as torch tensors)."""
    arrays = random_inputs(io, sizes, seed)
    return tuple(torch.from_numpy(np.ascontiguousarray(arrays[spec.name])) for spec in io.inputs)


@torch.no_grad()
def discover_outputs(model: nn.Module, resolved: ResolvedInputs) -> IOSpec:
    """Run the model once per dynamic axis (plus a base run) and name output dims after the axes they follow."""
    io = IOSpec(resolved.inputs)
    base = base_sizes(resolved)
    reference = _output_shapes(model, io, base)
    axis_of: dict[tuple[str, int], str] = {}
    for axis in resolved.dynamic_axes:
        changed = base | {axis: DISCOVERY_BATCH[1] if axis == BATCH else resolved.second_size(axis)}
        for name, shape in _output_shapes(model, io, changed).items():
            before = reference[name][0]
            if len(shape[0]) != len(before):
                raise ExportError(f"output {name!r} changes rank when {axis!r} changes", hint="outputs need fixed rank")
            for i, (a, b) in enumerate(zip(before, shape[0], strict=True)):
                if a != b:
                    follows = a == base[axis] and b == changed[axis]
                    axis_of.setdefault((name, i), axis if follows else f"{name}_{axis}")
    outputs = []
    for name, (sizes, dtype) in reference.items():
        dims: tuple[int | str, ...] = tuple(axis_of.get((name, i), size) for i, size in enumerate(sizes))
        outputs.append(TensorSpec(name, dims, dtype))
    return IOSpec(resolved.inputs, tuple(outputs))


def base_sizes(resolved: ResolvedInputs) -> dict[str, int]:
    """Every dynamic axis at its representative size, batch at 2: the example batch given to exporters and
    tracing (not 1: a batch of 1 may be specialised)."""
    sizes = {axis: resolved.sizes.get(axis, DEFAULT_DIM_SIZE) for axis in resolved.dynamic_axes}
    return sizes | {BATCH: DISCOVERY_BATCH[0]}


def _output_shapes(model: nn.Module, io: IOSpec, sizes: dict[str, int]) -> dict[str, tuple[tuple[int, ...], str]]:
    try:
        result = model(*torch_inputs(io, sizes))
    except Exception as exc:  # the user's forward failed on inputs built from the spec: say which spec
        shapes = ", ".join(f"{s.name}{list(s.concrete_shape(sizes))}:{s.dtype}" for s in io.inputs)
        raise ExportError(
            f"the model's forward failed on inputs {shapes}: {type(exc).__name__}: {exc}",
            hint="check the input shapes (--input, --dynamic) against what the model expects",
        ) from exc
    return {name: (tuple(t.shape), str(t.dtype).removeprefix("torch.")) for name, t in flatten_outputs(result)}
