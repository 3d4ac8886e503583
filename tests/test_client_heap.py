"""A client process keeps large request buffers in its heap (serve.client_heap): what glibc does with an 8 MiB
block, before and after keep_large_buffers(), in fresh interpreters (the setting is process-wide)."""

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
from modelship.serve.client_heap import keep_large_buffers

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
applied = keep_large_buffers() if sys.argv[1] == "keep" else None
block = bytearray(8 << 20)
mapped = libc.mallinfo2().hblkhd >= 8 << 20
del block
print(json.dumps({"applied": applied, "mapped": mapped, "heap_kept": libc.mallinfo2().arena >= 8 << 20}))
"""


def probe(mode: str, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env={**os.environ, **env}
    )
    return json.loads(done.stdout)


def test_by_default_a_large_block_is_mapped_and_returned_on_every_request():
    assert probe("default") == {"applied": None, "mapped": True, "heap_kept": False}


def test_kept_large_blocks_come_from_the_heap_and_stay_there_for_the_next_request():
    assert probe("keep") == {"applied": True, "mapped": False, "heap_kept": True}


def test_a_threshold_the_user_set_wins():
    assert probe("keep", MALLOC_TRIM_THRESHOLD_="131072") == {"applied": False, "mapped": True, "heap_kept": False}


def test_modelships_client_keeps_them():
    code = "from modelship.serve.client import TritonClient; from modelship.serve.client_heap import keep_large_buffers"
    code += "; TritonClient('grpc://127.0.0.1:1'); print(keep_large_buffers.cache_info().currsize)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"
