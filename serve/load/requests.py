"""Request functions for the load generator: one Triton inference over gRPC, HTTP (binary or JSON tensors) or
system shared memory.

Each `*_sender(...)` returns a factory; the load generator calls it once per thread, so every thread owns its
client (and, for shared memory, its own input/output regions). Calling the result sends one request and returns
the output arrays; `close()` releases the client and unregisters the regions. A Sender keeps the process's large
request buffers in its heap (`keep_large_buffers`): a process-wide allocator setting, the load generator's own.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import os
import platform
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import numpy as np

from modelship.contract.tensors import Tensors
from modelship.serve.protocols import WireProtocol

PROTOCOLS = ("grpc", "http", "http-json", "grpc-shm", "http-shm")  # the load generator's names: protocol[-variant]
UNREGISTER_WAIT_S = 2.0  # how long a region still in use after the last response may take to be let go
_region_ids = itertools.count()
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest dynamic mmap threshold
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's dynamic rule pairs with it
_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


@functools.cache
def keep_large_buffers() -> bool:
    """Keep blocks up to MMAP_THRESHOLD in this process's heap: glibc's mmap threshold set to 32 MiB and its trim
    threshold to 64 MiB, once, for the whole process. True when applied now or earlier in this process; False where
    the C library is not glibc or the environment sets either threshold (the user's choice wins).

    tritonclient builds every request anew: a 3x224x224 float32 tensor is a 600 kB protobuf arena plus a 600 kB
    serialized message (gRPC), or a 600 kB body (HTTP). On a process's main thread, with glibc's defaults, those
    blocks come from the top of the heap, which is trimmed again when they are freed, so every request moves the
    heap's end back and forth and faults 300 fresh pages in: 1.2 ms to build and serialize one such gRPC request,
    against 0.044 ms with large buffers kept (2 cores, 2026-12-04). Other threads allocate from arenas of their own,
    which do not shrink this way (0.05 ms with the defaults): the load generator's threads never paid it.
    """
    if platform.libc_ver()[0] != "glibc" or any(name in os.environ for name in USER_SETTINGS):
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


class Variant(StrEnum):
    """How a request's tensors travel: BINARY in the message (HTTP's binary tensor extension), JSON as lists in the
    HTTP body, SHM in system shared memory regions registered with the server."""

    BINARY = "binary"
    JSON = "json"
    SHM = "shm"


def parse_protocol(name: str) -> tuple[WireProtocol, Variant]:
    """A load generator protocol name (PROTOCOLS; a WireProtocol member is one) as its wire protocol and variant:
    "http-json" -> (HTTP, JSON), a bare wire protocol sends binary tensors."""
    if name not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {name!r}")
    base, _, variant = name.partition("-")
    return WireProtocol(base), Variant(variant or Variant.BINARY)


def _module(protocol: WireProtocol) -> Any:
    if protocol is WireProtocol.GRPC:
        import tritonclient.grpc as module
    else:
        import tritonclient.http as module
    return module


def _address(url: str) -> str:
    return url.split("://", 1)[-1]


class Sender:
    """One thread's client for one model, sending the same inputs on every call."""

    def __init__(
        self,
        url: str,
        protocol: WireProtocol,
        model: str,
        inputs: Tensors,
        outputs: Tensors,
        variant: Variant = Variant.BINARY,
        headers: dict[str, str] | None = None,
    ):
        from tritonclient.utils import np_to_triton_dtype

        # only a caller on the main thread gains (the load generator's threads never paid for fresh pages, measured
        # 2026-12-04); the bench's processes are its own, so the setting stays with the bench
        keep_large_buffers()
        self.headers = headers or {}  # the server's restricted-API secret: shared-memory registration needs it
        self.module = _module(protocol)
        self.protocol = protocol
        self.model = model
        self.client = self.module.InferenceServerClient(_address(url))
        self.regions: list[tuple[str, Any]] = []
        shared_memory = variant is Variant.SHM
        binary = {"binary_data": variant is not Variant.JSON} if protocol is WireProtocol.HTTP else {}
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

    def __call__(self) -> Tensors:
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
            self._unregister(name)
            shm.destroy_shared_memory_region(handle)
        self.regions = []
        self.client.close()
        if self.protocol is WireProtocol.HTTP:
            release_thread_hub()

    def _unregister(self, name: str) -> None:
        """Triton may still hold a region for a moment after the response that used it ("currently in use"): ask
        again until it lets go, for at most UNREGISTER_WAIT_S."""
        from tritonclient.utils import InferenceServerException

        deadline = time.monotonic() + UNREGISTER_WAIT_S
        while True:
            try:
                self.client.unregister_system_shared_memory(name, headers=self.headers)
                return
            except InferenceServerException as exc:
                if "in use" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


def release_thread_hub() -> None:
    """Destroy this thread's gevent hub, unless this is the main thread. tritonclient.http (geventhttpclient) gives
    each thread that sends a hub with a libev loop of its own (2 file descriptors) that outlives the thread: a load
    generator starting threads window after window ran out of descriptors (a tune's 405 points hit 20,000). The main
    thread's hub stays: the project's other HTTP clients run on it."""
    if threading.current_thread() is threading.main_thread():
        return
    import gevent

    gevent.get_hub().destroy(destroy_loop=True)


def sender(
    url: str,
    protocol: WireProtocol,
    model: str,
    inputs: Tensors,
    outputs: Tensors,
    variant: Variant = Variant.BINARY,
    headers: dict[str, str] | None = None,
) -> Callable[[], Sender]:
    """A factory of Senders over `protocol`, the tensors travelling as `variant` says: BINARY, JSON (HTTP only) or
    SHM (system shared memory for inputs and outputs; registering a region takes the server's restricted-API
    `headers`). A load generator name (PROTOCOLS) gives both: `parse_protocol`. `outputs` are example output arrays
    (from an in-process run): their names, dtypes and shapes."""
    if variant is Variant.JSON and protocol is not WireProtocol.HTTP:
        raise ValueError(f"JSON tensors travel over http only, not {protocol}")
    return lambda: Sender(url, protocol, model, inputs, outputs, variant, headers)
