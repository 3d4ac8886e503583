"""The kinds of x86 CPU an INT8 model's answers differ on, and how to tell them apart from /proc/cpuinfo's flags.

ONNX Runtime's integer kernels multiply unsigned 8-bit activations by signed 8-bit weights (U8S8). With VNNI
(AVX-512 VNNI or AVX-VNNI) each product is summed in 32 bits; without it (AVX2) pairs of products are summed in 16
bits first and saturate when the weights use their full range (ONNX Runtime's documented caveat). Weights in 7 bits
never saturate, so a variant with them answers alike on both kinds; one with full-range weights, judged on a VNNI
CPU, holds there only."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

PARAM_INT8_CPU = "modelship.int8_cpu"  # a published INT8 model's config note: "<kind>: <recipe>; where it holds"


class CpuKind(StrEnum):
    """Where an INT8 variant is to be served."""

    VNNI = "vnni"  # AVX-512 VNNI or AVX-VNNI: every uint8 x int8 product summed in 32 bits
    AVX2 = "avx2"  # x86-64 without VNNI: pairs of products summed in 16 bits, saturating on full-range weights

    @property
    def description(self) -> str:
        return "a VNNI CPU (AVX-512 VNNI or AVX-VNNI)" if self is CpuKind.VNNI else "an AVX2 CPU without VNNI"


def cpu_kind(cpuinfo: str) -> CpuKind:
    """The kind of the CPU whose /proc/cpuinfo text is `cpuinfo`."""
    flags = set(cpuinfo.split())
    return CpuKind.VNNI if {"avx512_vnni", "avx_vnni"} & flags else CpuKind.AVX2


def this_cpu() -> CpuKind:
    """This machine's kind (AVX2 where /proc/cpuinfo cannot be read: the kind every x86-64 variant holds on)."""
    try:
        return cpu_kind(Path("/proc/cpuinfo").read_text())
    except OSError:
        return CpuKind.AVX2


def held_only_on_vnni(note: str) -> bool:
    """Whether a published PARAM_INT8_CPU note says the variant's verdict holds on VNNI CPUs only."""
    return note.startswith(f"{CpuKind.VNNI.value}:") and "VNNI CPUs only" in note
