"""Keep a client process's large request buffers in its heap, so that each request does not pay the kernel for
fresh pages.

tritonclient builds every request anew: a 3x224x224 float32 tensor is a 600 kB protobuf arena plus a 600 kB
serialized message (gRPC), or a 600 kB body (HTTP). On a process's main thread, with glibc's default settings, those
blocks come from the top of the heap, and the heap is trimmed again when they are freed. So every request moves the
heap's end back and forth (four `brk` calls) and faults 300 fresh pages in. Measured on 2 cores (2026-12-04),
building and serializing one such gRPC request took 1.2 ms on the main thread, with torch imported or not. With
large buffers kept it took 0.044 ms. Other threads allocate from arenas of their own, which do not shrink this way:
0.05 ms with the defaults. So a script that sends from its main thread (as `modelship infer` does) pays about 1 ms
per request, a fifth of the small benchmark model's served latency. The bench's load generator sends from threads
and did not pay it.

`keep_large_buffers()` sets glibc's mmap threshold to 32 MiB and its trim threshold to 64 MiB for this process,
once. Blocks up to 32 MiB then come from the heap. Up to 64 MiB of freed heap then stays with the process for the
next request instead of going back to the kernel. It does nothing where the C library is not glibc, and nothing
when the environment already sets `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` (the user's choice wins;
setting either to glibc's defaults, 131072, turns this off).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest dynamic mmap threshold
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's dynamic rule pairs with it
_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


@functools.cache
def keep_large_buffers() -> bool:
    """Keep blocks up to MMAP_THRESHOLD in this process's heap (see the module doc). True when applied now or
    earlier in this process; False where the C library is not glibc or the environment sets either threshold."""
    if platform.libc_ver()[0] != "glibc" or any(name in os.environ for name in USER_SETTINGS):
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
