"""Where in the network an artifact parts from eager PyTorch, and what to do about it.

Eager module outputs (and inputs) are captured with forward hooks on one input set. For ONNX the graph tensor that
closes each module's scope (the dynamo exporter's name scopes, or the legacy exporter's `/module/Op` node names) is
exposed as an extra output on a copy of the graph, and compared with the module's eager output; fp16 artifacts are
run as export.precision.fp16.ranges.emulate_fp16 computes them, since a CPU run hides float16's range; the graph's
tensors are read through the one probe (parity.probe), with ONNX Runtime's graph optimisations off. For TorchScript each
scripted submodule is replayed on the inputs eager PyTorch gave that module, so the culprit is the module whose own
computation differs. The first diverging module in execution order (children finish before parents: the
innermost) is the answer, with its error figures and the ops inside it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from modelship.contract.json_object import JsonObject
from modelship.contract.precisions import get_precision
from modelship.contract.tensors import Tensors
from modelship.parity.onnx_graph import node_module, tensor_types
from modelship.parity.probe import Probe

FP16_TINY = float(np.finfo(np.float16).tiny)  # float16's smallest normal: an output entirely below it underflows


@dataclass
class Divergence:
    """A module whose output differs from eager PyTorch's: error figures and the ops inside it."""

    module: str
    max_abs: float
    relative: float
    cosine: float
    ops: list[str] = field(default_factory=list)
    note: str = ""

    def line(self) -> str:
        ops = f" ({', '.join(dict.fromkeys(self.ops))})" if self.ops else ""
        text = (
            f"first divergence in module '{self.module}'{ops}: max abs {self.max_abs:.3g}, relative "
            f"{self.relative:.3g}, cosine {self.cosine:.6f}"
        )
        return text + (f"; {self.note}" if self.note else "")


@dataclass
class Explanation:
    """What localisation found for one artifact."""

    artifact: str
    first: Divergence | None
    compared: int
    notes: list[str] = field(default_factory=list)
    fp16_keep: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        found = [self.first.line()] if self.first else []
        if not self.first and (self.compared or not self.notes):
            found.append(f"no module output differs ({self.compared} compared)")
        if self.fp16_keep:
            flags = " ".join(f"--fp16-keep {m}" for m in self.fp16_keep)
            found.append(f"parity passes with these modules kept in fp32: {', '.join(self.fp16_keep)} ({flags})")
        return found + self.notes

    def to_dict(self) -> JsonObject:
        return {
            "artifact": self.artifact,
            "first": asdict(self.first) if self.first else None,
            "compared": self.compared,
            "notes": self.notes,
            "fp16_keep": self.fp16_keep,
        }


@dataclass
class EagerTrace:
    """What eager PyTorch's modules gave on one input set, each module's first call."""

    order: list[str]  # module names in completion order
    outputs: Tensors  # each module's first output tensor
    inputs: dict[str, tuple]  # the arguments each module was called with
    tensors: dict[str, list[np.ndarray]] = field(default_factory=dict)  # every tensor of each module's output
    repeated: set[str] = field(default_factory=set)  # modules called more than once (an FPN level's head)
    selected: set[str] = field(default_factory=set)  # modules that finished after a detector's first NMS


def eager_trace(model: Any, args: Sequence[Any]) -> EagerTrace:
    """Every module's first call, by forward hooks, on `args`."""
    import torch

    names = {id(m): n for n, m in model.named_modules() if n}
    trace = EagerTrace([], {}, {})
    decided = [False]

    def hook(module: Any, given: tuple, output: Any) -> None:
        name = names.get(id(module))
        every = all_tensors(output)
        if name is None or not every:
            return
        if name in trace.outputs:
            trace.repeated.add(name)
            return
        if decided[0]:
            trace.selected.add(name)
        trace.order.append(name)
        # copies: a float32 CPU tensor shares its memory, and an in-place activation next (ReLU(inplace=True),
        # Hardswish) would otherwise rewrite what was recorded as this module's output
        trace.tensors[name] = [t.detach().float().cpu().numpy().copy() for t in every]
        trace.outputs[name] = trace.tensors[name][0]
        trace.inputs[name] = tuple(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in given)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.inference_mode(), _on_nms(lambda: decided.__setitem__(0, True)):
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    return trace


@contextmanager
def _on_nms(seen: Callable[[], None]) -> Iterator[None]:
    """Call `seen` whenever torchvision's NMS runs (a detector's RPN or final selection)."""
    from torchvision.ops import boxes

    nms = boxes.nms

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen()
        return nms(*args, **kwargs)

    boxes.nms = watched
    try:
        yield
    finally:
        boxes.nms = nms


def all_tensors(value: Any) -> list[Any]:
    """Every tensor of a returned structure (tensor, tuple/list, dict), in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else []
    return [t for v in items for t in all_tensors(v)]


def first_tensor(value: Any) -> Any:
    """The first tensor of a returned structure (tensor, tuple/list, dict), or None."""
    return next(iter(all_tensors(value)), None)


def divergence(module: str, reference: np.ndarray, candidate: np.ndarray, precision: str) -> Divergence | None:
    """A Divergence when `candidate` is not `reference` within its precision's localise_limit
    (contract.precisions), or not finite where it is; else None."""
    ref, cand = reference.astype(np.float64).ravel(), np.asarray(candidate, np.float64).ravel()
    finite = np.isfinite(ref)
    note = ""
    if not np.isfinite(cand[finite]).all():
        note = "the candidate has inf/NaN where eager PyTorch is finite (float16 overflow)"
    scale = float(np.abs(ref[finite]).max()) if finite.any() else 0.0
    diff = np.abs(ref - cand)[finite & np.isfinite(cand)]
    max_abs = float(diff.max()) if diff.size else float("inf")
    relative = max_abs / max(scale, 1e-6)
    usable = np.where(np.isfinite(cand[finite]), cand[finite], 0.0)  # inf/NaN count as nothing for the angle
    norm = float(np.linalg.norm(ref[finite]) * np.linalg.norm(usable))
    cosine = float(np.dot(ref[finite], usable) / norm) if norm else 0.0
    if precision == "fp16" and 0 < scale < FP16_TINY:
        note = (
            note
            or f"every value is below float16's smallest normal {FP16_TINY:.3g} (max |x| {scale:.3g}): it underflows"
        )
    if not note and relative <= get_precision(precision).localise_limit:
        return None
    return Divergence(module, max_abs, relative, cosine, note=note)


def localize_onnx(proto: Any, model: Any, io: Any, inputs: Tensors, precision: str, artifact: str) -> Explanation:
    """Compare every module's eager output with the graph tensor that closes its scope in `proto` (an fp32
    graph, or the fp16 emulation), first divergence in execution order."""
    import torch
    from onnx import TensorProto

    args = [torch.from_numpy(np.ascontiguousarray(inputs[t.name])) for t in io.inputs]
    trace = eager_trace(model, args)
    closing, ops = _scope_outputs(proto)
    types = tensor_types(proto)
    wanted = {
        m: closing[m]
        for m in trace.order
        if m not in trace.repeated | trace.selected and types.get(closing.get(m, "")) == TensorProto.FLOAT
    }
    values = Probe(proto, list(wanted.values())).run(inputs)
    folded = _folded_norms(model, trace.order, trace.outputs, closing)

    def pair(module: str) -> tuple[np.ndarray, np.ndarray] | None:
        value = values.get(wanted.get(module, ""))
        if value is None:
            return None
        reference = [folded[module]] if module in folded else trace.tensors[module]
        return _same_tensor(reference, np.asarray(value))

    found = _first(artifact, trace.order, pair, precision, ops)
    if trace.selected and found.first is None:
        found.notes.append(
            f"{len(trace.selected)} modules run on what NMS selected ({', '.join(sorted(trace.selected)[:3])}, ...) "
            "are not compared: where every module before it agrees, boxes differ by decisions on tied scores"
        )
    return found


def _same_tensor(reference: list[np.ndarray], value: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(the eager tensor the graph tensor `value` is, value): the one of a module's output tensors with its shape
    (an RPN head answers per-level logits and box offsets; the graph tensor closing its scope is the last level's
    offsets), else the one with its size (a reshaped output); None when that is not one tensor."""
    for same in (lambda t: t.shape == value.shape, lambda t: t.size == value.size):
        found = [t for t in reference if same(t)]
        if found:
            return (found[0], value) if len(found) == 1 else None
    return None


def _folded_norms(model: Any, order: list[str], eager: Tensors, closing: dict[str, str]) -> Tensors:
    """For each module whose graph tensor is its output and the next module's, a BatchNorm the exporter folded
    into its Conv (the norm has no node of its own): the norm's eager output, which that tensor is."""
    from torch import nn

    modules = dict(model.named_modules())
    return {
        before: eager[after]
        for before, after in itertools.pairwise(order)
        if after not in closing and isinstance(modules.get(after), nn.modules.batchnorm._BatchNorm)
    }


def localize_torchscript(
    scripted: Any, model: Any, io: Any, inputs: Tensors, precision: str, artifact: str
) -> Explanation:
    """Replay each scripted submodule on the inputs eager PyTorch gave the same module; the first whose own output
    differs is the culprit."""
    import torch

    args = [torch.from_numpy(np.ascontiguousarray(inputs[t.name])) for t in io.inputs]
    return replay(getattr(scripted, "inner", scripted), model, args, precision, artifact)


def replay(candidate: Any, model: Any, args: Sequence[Any], precision: str, artifact: str) -> Explanation:
    """Run each submodule of `candidate` (a scripted module or an eager copy, e.g. in half precision) on the inputs
    the same-named submodule of the eager `model` received, and compare outputs: first divergence wins."""
    import torch

    trace = eager_trace(model, args)
    dtype = next((p.dtype for p in candidate.parameters() if p.is_floating_point()), torch.float32)

    def run(name: str) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            sub = _walk(candidate, name)
            cast = tuple(
                t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in trace.inputs[name]
            )
            with torch.inference_mode():
                out = first_tensor(sub(*cast))
        except (AttributeError, RuntimeError, TypeError):
            return None
        if out is None or out.numel() != trace.outputs[name].size:
            return None
        return trace.outputs[name], out.float().numpy()

    return _first(artifact, trace.order, run, precision, {})


def _walk(module: Any, name: str) -> Any:
    for part in name.split("."):
        module = getattr(module, part)
    return module


def _first(
    artifact: str,
    order: list[str],
    pair: Callable[[str], tuple[np.ndarray, np.ndarray] | None],
    precision: str,
    ops: dict[str, list[str]],
) -> Explanation:
    """The first module in `order` whose (eager, candidate) outputs (`pair`; None: not comparable) diverge."""
    compared = 0
    for module in order:
        found = pair(module)
        if found is None:
            continue
        compared += 1
        divergent = divergence(module, *found, precision)
        if divergent is not None:
            divergent.ops = ops.get(module, [])
            return Explanation(artifact, divergent, compared)
    return Explanation(artifact, None, compared)


def _scope_outputs(proto: Any) -> tuple[dict[str, str], dict[str, list[str]]]:
    """For each module scope (and its ancestors): the last float tensor its nodes write, and their op types."""
    closing: dict[str, str] = {}
    ops: dict[str, list[str]] = {}
    for node in proto.graph.node:
        module = node_module(node)
        if not module or not node.output:
            continue
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            scope = ".".join(parts[:depth])
            closing[scope] = node.output[0]
            ops.setdefault(scope, []).append(node.op_type)
    return closing, ops
