"""INT8's options: what it calibrates on, whether a slower variant is written, and the CPU it will be served on
(`--calibrate`, `--keep-slower`, `--int8-cpu`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from modelship.contract.cpu_kinds import CpuKind
from modelship.export.precision.registry import FlagKind, OptionFlag, VariantOptions, flag


@dataclass(frozen=True)
class Int8Options(VariantOptions):
    """`calibrate`: images (a folder) or text lines (a file) through the export's preprocessing; `holdout`: the same
    kind of inputs to judge on instead of 1 in 5 of `calibrate`'s; `keep_slower`:
    written even when measured slower than fp32; `cpu`: the kind of CPU it will be served on (None: this one's)."""

    precision: ClassVar[str] = "int8"
    calibrate: Path | None = field(
        default=None,
        metadata=flag(
            OptionFlag(
                "--calibrate",
                FlagKind.PATH,
                "--int8: real inputs to calibrate on, run through the export's own preprocessing: a folder of images "
                "(a few hundred like production's; at least 10) or, for a text model, a file of lines. 1 in 5 is held "
                "back to judge the INT8 model. A text model without it is quantized dynamically.",
                metavar="DATA",
            )
        ),
    )
    holdout: Path | None = field(
        default=None,
        metadata=flag(
            OptionFlag(
                "--holdout",
                FlagKind.PATH,
                "--int8: real inputs to judge the INT8 model on instead of 1 in 5 of --calibrate's (every --calibrate "
                "input then calibrates): a folder of images, or a file of lines for a text model. A verdict on n "
                "inputs states its 95% interval; at a 0.9 bar it takes about 180 to tell 0.9 from 0.85.",
                metavar="DATA",
            )
        ),
    )
    keep_slower: bool = field(
        default=False,
        metadata=flag(
            OptionFlag(
                "--keep-slower",
                FlagKind.SWITCH,
                "--int8: write the INT8 variant even when it measured slower than fp32 on this machine.",
            )
        ),
    )
    cpu: CpuKind | None = field(
        default=None,
        metadata=flag(
            OptionFlag(
                "--int8-cpu",
                FlagKind.CHOICE,
                "--int8: the kind of x86 CPU the model will be served on. vnni (AVX-512 VNNI or AVX-VNNI): full-range "
                "weights are judged too, often closer to fp32, and a variant using them holds on VNNI CPUs only; avx2: "
                "7-bit weights, which hold on any x86-64 CPU (on an AVX2 CPU full-range weights are judged with their "
                "saturation). Default: this machine's kind. Recorded in the manifest and the published config.",
                choices=tuple(kind.value for kind in CpuKind),
            )
        ),
    )

    def __post_init__(self) -> None:
        for name in ("calibrate", "holdout"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        if self.cpu is not None:
            object.__setattr__(self, "cpu", CpuKind(self.cpu))
