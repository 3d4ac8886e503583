"""Request functions for the load generator: one Triton inference over gRPC, HTTP (binary or JSON tensors) or
system shared memory.

Each `*_sender(...)` returns a factory; the load generator calls it once per thread, so every thread owns its
client (and, for shared memory, its own input/output regions). Calling the result sends one request and returns
the output arrays; `close()` releases the client and unregisters the regions.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

Arrays = dict[str, np.ndarray]
PROTOCOLS = ("grpc", "http", "http-json", "grpc-shm", "http-shm")
_region_ids = itertools.count()


def _module(protocol: str) -> Any:
    if protocol == "grpc":
        import tritonclient.grpc as module
    elif protocol == "http":
        import tritonclient.http as module
    else:
        raise ValueError(f"protocol must be grpc or http, got {protocol!r}")
    return module


def _address(url: str) -> str:
    return url.split("://", 1)[-1]


class Sender:
    """One thread's client for one model, sending the same inputs on every call."""

    def __init__(
        self,
        url: str,
        protocol: str,
        model: str,
        inputs: Arrays,
        outputs: Arrays,
        variant: str = "",
        headers: dict[str, str] | None = None,
    ):
        from tritonclient.utils import np_to_triton_dtype

        from modelship.serve.client_heap import keep_large_buffers

        # as modelship's TritonClient does; only a caller on the main thread gains (the load generator's threads
        # never paid for fresh pages, measured 2026-12-04)
        keep_large_buffers()
        self.headers = headers or {}  # the server's restricted-API secret: shared-memory registration needs it
        self.module = _module(protocol)
        self.protocol = protocol
        self.model = model
        self.client = self.module.InferenceServerClient(_address(url))
        self.regions: list[tuple[str, Any]] = []
        shared_memory = variant == "shm"
        binary = {"binary_data": variant != "json"} if protocol == "http" else {}
        self.inputs = []
        for name, array in inputs.items():
            tensor = self.module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            if shared_memory:
                tensor.set_shared_memory(self._region(name, array), array.nbytes)
            else:
                tensor.set_data_from_numpy(np.ascontiguousarray(array), **binary)
            self.inputs.append(tensor)
        self.outputs = []
        self.output_regions: dict[str, tuple[Any, np.dtype, tuple[int, ...]]] = {}
        for name, array in outputs.items():
            wanted = self.module.InferRequestedOutput(name, **binary)
            if shared_memory:
                region = self._region(name, array, fill=False)
                wanted.set_shared_memory(region, array.nbytes)
                self.output_regions[name] = (self.regions[-1][1], array.dtype, array.shape)
            self.outputs.append(wanted)
        self.output_names = list(outputs)

    def _region(self, tensor: str, array: np.ndarray, *, fill: bool = True) -> str:
        import tritonclient.utils.shared_memory as shm

        name = f"modelship_bench_{os.getpid()}_{next(_region_ids)}_{tensor}"
        handle = shm.create_shared_memory_region(name, "/" + name, array.nbytes)
        if fill:
            shm.set_shared_memory_region(handle, [np.ascontiguousarray(array)])
        self.regions.append((name, handle))
        self.client.register_system_shared_memory(name, "/" + name, array.nbytes, headers=self.headers)
        return name

    def __call__(self) -> Arrays:
        result = self.client.infer(self.model, self.inputs, outputs=self.outputs)
        if not self.output_regions:
            return {name: result.as_numpy(name) for name in self.output_names}
        import tritonclient.utils.shared_memory as shm

        return {
            name: shm.get_contents_as_numpy(handle, dtype, shape)
            for name, (handle, dtype, shape) in self.output_regions.items()
        }

    def close(self) -> None:
        import tritonclient.utils.shared_memory as shm

        for name, handle in self.regions:
            self.client.unregister_system_shared_memory(name, headers=self.headers)
            shm.destroy_shared_memory_region(handle)
        self.regions = []
        self.client.close()


def sender(
    url: str, protocol: str, model: str, inputs: Arrays, outputs: Arrays, headers: dict[str, str] | None = None
) -> Callable[[], Sender]:
    """A factory of Senders. `protocol`: grpc, http (binary tensors), http-json (tensors as JSON lists), grpc-shm or
    http-shm (system shared memory for inputs and outputs; registering a region takes the server's restricted-API
    `headers`). `outputs` are example output arrays (from an in-process run): their names, dtypes and shapes."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    base, _, variant = protocol.partition("-")
    return lambda: Sender(url, base, model, inputs, outputs, variant, headers)
