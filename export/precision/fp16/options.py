"""fp16's options: its variants' I/O type and the modules they keep in fp32 (`--fp16-io`, `--fp16-keep`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from modelship.export.precision.registry import FlagKind, OptionFlag, VariantOptions, flag


@dataclass(frozen=True)
class Fp16Options(VariantOptions):
    """`io`: the fp16 variants take and return float16 (default: float32 I/O, the casts inside); `keep`: modules
    (dotted names) kept in fp32 in them."""

    precision: ClassVar[str] = "fp16"
    io: bool = field(
        default=False,
        metadata=flag(
            OptionFlag(
                "--fp16-io",
                FlagKind.SWITCH,
                "fp16 variants (ONNX and TorchScript) take and return float16. Default: float32 I/O with the casts "
                "inside the model, so clients and Triton's classification extension see FP32.",
            )
        ),
    )
    keep: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            OptionFlag(
                "--fp16-keep",
                FlagKind.REPEATED,
                "Keep this module (dotted name, e.g. blocks.3.attn) in fp32 in the fp16 variants; repeatable. "
                "export-model prints these flags when it had to find such modules itself.",
                metavar="MODULE",
            )
        ),
    )
