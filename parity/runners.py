"""Runners: one interface over eager PyTorch, TorchScript, ONNX Runtime and stored golden outputs.

Each follows `runner_protocol.Runner`, keyed by the IOSpec's names, so any two runners can be compared output by
output. torch and onnxruntime are imported only by the runner that needs them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelship.contract.artifact_details import FP16_DISABLED_OPTIMIZERS
from modelship.contract.dtypes import BY_ONNXRUNTIME
from modelship.contract.errors import ParityError
from modelship.contract.iospec import IOSpec
from modelship.contract.outputs import flatten_outputs
from modelship.contract.tensors import Tensors
from modelship.parity.isolation import IsolatedRunner, Worker
from modelship.parity.runner_protocol import BaseRunner

CRASH_HINT = (
    "ONNX Runtime itself crashed; fp16 graphs are known to trigger CPU optimizer bugs. Try the fp32 artifact, "
    "or report the model and onnxruntime version"
)


class TorchRunner(BaseRunner):
    """An eager `nn.Module` or a loaded ScriptModule. Float inputs are cast to the module's floating dtype (half
    for fp16 modules) and moved to its device; outputs are named by `flatten_outputs` order onto `io.outputs`."""

    def __init__(self, module: Any, io: IOSpec, name: str = "eager") -> None:
        self.module = module
        self.io = io
        self.name = name
        self._dtype, self._device = _module_dtype_device(module)

    def run(self, inputs: Tensors) -> Tensors:
        import torch

        args = []
        for spec in self.io.inputs:
            tensor = torch.from_numpy(np.ascontiguousarray(_take(inputs, spec.name, self.name)))
            if tensor.is_floating_point() and self._dtype is not None:
                tensor = tensor.to(self._dtype)
            args.append(tensor.to(self._device) if self._device is not None else tensor)
        try:
            with torch.inference_mode():
                result = self.module(*args)
        except RuntimeError as exc:
            raise ParityError(f"{self.name} failed on inputs {_shapes(inputs)}: {_first_line(exc)}") from None
        pairs = flatten_outputs(result)
        names = [spec.name for spec in self.io.outputs] or [name for name, _ in pairs]
        if len(names) != len(pairs):
            raise ParityError(
                f"{self.name} returned {len(pairs)} outputs ({', '.join(n for n, _ in pairs)}), the I/O spec names "
                f"{len(names)} ({', '.join(names)})"
            )
        return {name: _to_numpy(tensor) for name, (_, tensor) in zip(names, pairs, strict=True)}


class ReferenceRunner(TorchRunner):
    """An eager model that adds reference-only tensors to its outputs (its `reference_run` model hook: a detector's
    candidate pool, with which the `detections` compare function tells ties from moves)."""

    def run(self, inputs: Tensors) -> Tensors:
        import torch

        from modelship.checkpoint.families.model_hooks import reference_run

        image = torch.from_numpy(np.ascontiguousarray(_take(inputs, self.io.inputs[0].name, self.name)))
        return reference_run(self.module, lambda: super(ReferenceRunner, self).run(inputs), image)


def reference_runner(module: Any, io: IOSpec, name: str = "eager") -> TorchRunner:
    """The eager reference for `module`: with its reference-only tensors when it has any."""
    from modelship.checkpoint.families.model_hooks import has_reference_run

    return (ReferenceRunner if has_reference_run(module) else TorchRunner)(module, io, name=name)


class OnnxRuntimeRunner(BaseRunner):
    """An ONNX file in ONNX Runtime (session from `make_session`, created on first use; `model` holds the file's
    serialized bytes when the caller has them, `fp16` whether it is an fp16 graph when known). Inputs are cast to the
    session's declared input dtypes (fp16 I/O models take float32 arrays). With `isolated=True` the session lives
    in a child process (`worker`'s when given) and a native crash becomes a ParityError instead of killing the
    caller."""

    max_batch: int | None = None  # set from `io` (the base's is read-only)

    def __init__(
        self,
        path: Path,
        io: IOSpec | None = None,
        name: str = "onnxruntime",
        providers: list[str] | None = None,
        session_options: Any = None,
        *,
        isolated: bool = False,
        fp16: bool | None = None,
        model: bytes | None = None,
        worker: Worker | None = None,
    ) -> None:
        if isolated and (session_options is not None or model is not None):
            raise ValueError("session_options and model bytes are not sent to an isolated runner's child process")
        self.path = Path(path)
        self.io = io
        self.max_batch = io.max_rows if io is not None else None  # a single-row graph takes a set row by row
        self.name = name
        self.providers = providers
        self._options = session_options
        self._fp16 = fp16
        self._model = model
        self._isolated: IsolatedRunner | None = None
        self._session: Any = None
        if isolated:
            factory = functools.partial(
                OnnxRuntimeRunner, self.path, io, name, providers or default_providers(), fp16=fp16
            )
            self._isolated = IsolatedRunner(
                factory, name, what="ONNX Runtime", target=self.path.name, hint=CRASH_HINT, worker=worker
            )

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = make_session(
                self.path, self.providers, session_options=self._options, fp16=self._fp16, model=self._model
            )
            self._model = None
        return self._session

    def run(self, inputs: Tensors) -> Tensors:
        if self._isolated is not None:
            return self._isolated.run(inputs)
        session = self.session
        feeds = {
            arg.name: np.asarray(_take(inputs, arg.name, self.name)).astype(_numpy_dtype(arg.type), copy=False)
            for arg in session.get_inputs()
        }
        _check_fixed_dims(self.path.name, session.get_inputs(), feeds)
        try:
            values = session.run(None, feeds)
        except _ort_errors() as exc:
            raise ParityError(f"ONNX Runtime failed on {self.path.name} with inputs {_shapes(inputs)}: {exc}") from None
        names = [out.name for out in session.get_outputs()]
        wanted = [spec.name for spec in self.io.outputs] if self.io is not None else []
        if wanted and wanted != names and len(wanted) == len(names):
            names = wanted  # same outputs in the same order under the I/O spec's names
        return dict(zip(names, values, strict=True))

    def close(self) -> None:
        if self._isolated is not None:
            self._isolated.close()
        self._session = None


class GoldenRunner(BaseRunner):
    """Replays stored reference outputs: `run` finds the stored input set equal to the one given."""

    def __init__(self, inputs: Sequence[Tensors], outputs: Sequence[Tensors], name: str = "golden") -> None:
        self.name = name
        self._pairs = list(zip(inputs, outputs, strict=True))

    def run(self, inputs: Tensors) -> Tensors:
        for stored, outputs in self._pairs:
            if stored.keys() == inputs.keys() and all(np.array_equal(stored[k], inputs[k]) for k in stored):
                return outputs
        raise ParityError("these inputs are not in the golden data", hint="compare on the golden input sets")


def make_session(
    path: Path,
    providers: list[str] | None = None,
    *,
    session_options: Any = None,
    fp16: bool | None = None,
    model: bytes | None = None,
) -> Any:
    """THE place ONNX Runtime sessions are created: ENABLE_ALL graph optimizations, intra-op threads = cores, the
    CPU provider unless CUDA is really usable, and the fp16 segfault workaround for fp16 graphs (`fp16=None`
    detects them from the file). `model`: the file's serialized bytes when the caller holds them (read no file)."""
    import onnxruntime as ort

    path = Path(path)
    if session_options is None:
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session_options.intra_op_num_threads = _cores()
        session_options.log_severity_level = 3
    if fp16 is None:
        fp16 = is_fp16_model(path)
    extra = {"disabled_optimizers": list(FP16_DISABLED_OPTIMIZERS)} if fp16 else {}
    try:
        source = str(path) if model is None else model
        return ort.InferenceSession(source, session_options, providers=providers or default_providers(), **extra)
    except _ort_errors() as exc:
        raise ParityError(f"ONNX Runtime cannot load {path}: {_first_line(exc)}") from None


@functools.cache
def default_providers() -> list[str]:
    """["CUDAExecutionProvider", "CPUExecutionProvider"] when ONNX Runtime has CUDA and a GPU is present, else CPU.
    (onnxruntime-gpu lists the CUDA provider even without a GPU, so torch is asked whether CUDA really works.)"""
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        try:
            import torch
        except ImportError:
            return ["CPUExecutionProvider"]
        if torch.cuda.is_available():
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def is_fp16_model(path: Path) -> bool:
    """True when the graph holds float16 inputs, outputs, initializers or casts to float16 (weights not loaded)."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, DecodeError) as exc:
        raise ParityError(f"{path}: not a readable ONNX file ({_first_line(exc)})") from None
    half = onnx.TensorProto.FLOAT16
    graph = model.graph
    if any(v.type.tensor_type.elem_type == half for v in (*graph.input, *graph.output)):
        return True
    if any(init.data_type == half for init in graph.initializer):
        return True
    return any(
        node.op_type == "Cast" and any(a.name == "to" and a.i == half for a in node.attribute) for node in graph.node
    )


def _check_fixed_dims(file: str, args: Sequence[Any], feeds: Tensors) -> None:
    """ParityError naming every axis the graph fixed to another size than the input has (a baked-in batch axis
    fails here with a clear message instead of ONNX Runtime's INVALID_ARGUMENT)."""
    wrong = [
        f"{arg.name}[{axis}] is fixed to {dim} in the graph, got {feeds[arg.name].shape[axis]}"
        for arg in args
        if feeds[arg.name].ndim == len(arg.shape)
        for axis, dim in enumerate(arg.shape)
        if isinstance(dim, int) and dim != feeds[arg.name].shape[axis]
    ]
    if wrong:
        baked = any(w.split("[", 1)[1].startswith("0]") for w in wrong)
        raise ParityError(
            f"{file}: {'; '.join(wrong)}" + (" - the batch axis is baked in, not dynamic" if baked else ""),
            hint="re-export with the axis dynamic (export-model marks 'batch' dynamic) or feed the fixed size",
        )


@functools.cache
def _ort_errors() -> tuple[type[Exception], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return tuple(v for v in vars(state).values() if isinstance(v, type) and issubclass(v, Exception))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _module_dtype_device(module: Any) -> tuple[Any, Any]:
    if not hasattr(module, "parameters"):  # a compiled package (AOTInductor): float32 on the CPU
        return None, None
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype, tensor.device
    return None, None


def _to_numpy(tensor: Any) -> np.ndarray:
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


def _take(inputs: Tensors, name: str, runner: str) -> np.ndarray:
    try:
        return inputs[name]
    except KeyError:
        raise ParityError(f"{runner}: no input named {name!r} (given: {', '.join(inputs)})") from None


def _shapes(inputs: Tensors) -> str:
    return ", ".join(f"{k}{list(np.shape(v))}" for k, v in inputs.items())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _numpy_dtype(onnxruntime_type: str) -> Any:
    """The numpy dtype of an ONNX Runtime input type (None: leave the array as it is, e.g. bfloat16)."""
    name = BY_ONNXRUNTIME.get(onnxruntime_type)
    return None if name is None or name == "bfloat16" else np.dtype(name)
