"""What glibc does with an 8 MiB block in a fresh interpreter (allocator settings are process-wide): a TritonClient
leaves them as they were; the bench's load generator keeps large request buffers in its own heap
(modelship.serve.load.requests.keep_large_buffers)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

PROBE = """
import ctypes, json, sys

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

applied = None
if sys.argv[1] == "keep":
    from modelship.serve.load.requests import keep_large_buffers
    applied = keep_large_buffers()
elif sys.argv[1] == "client":
    from modelship.serve.client import TritonClient
    for url in ("http://127.0.0.1:1", "grpc://127.0.0.1:1"):
        TritonClient(url).close()
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
before = libc.mallinfo2()
block = bytearray(8 << 20)
mapped = libc.mallinfo2().hblkhd - before.hblkhd >= 8 << 20
del block
heap_kept = libc.mallinfo2().arena - before.arena >= 8 << 20
print(json.dumps({"applied": applied, "mapped": mapped, "heap_kept": heap_kept}))
"""
DEFAULTS = {"applied": None, "mapped": True, "heap_kept": False}  # glibc's: mapped, and returned when freed


def probe(mode: str, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return json.loads(done.stdout)


def test_by_default_a_large_block_is_mapped_and_returned_on_every_request():
    assert probe("default") == DEFAULTS


def test_a_triton_client_leaves_the_processs_allocator_settings_alone():
    assert probe("client") == DEFAULTS


def test_kept_large_blocks_come_from_the_heap_and_stay_there_for_the_next_request():
    assert probe("keep") == {"applied": True, "mapped": False, "heap_kept": True}


def test_a_threshold_the_user_set_wins():
    assert probe("keep", MALLOC_TRIM_THRESHOLD_="131072") == {**DEFAULTS, "applied": False}
