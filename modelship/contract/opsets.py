"""Which ONNX opset and IR version a Triton release can load.

Triton's ONNX Runtime backend is built against one ONNX Runtime release, and an ONNX Runtime release loads models
up to the opset and IR version of the ONNX release it implements (newer ones fail with "Unsupported model IR
version" or "opset N is under development"). So the Triton release we publish for caps what `export-model` may write.

Sources (see docs/export.md): Triton's release notes / onnxruntime_backend build (TRITON_BUILD_ONNXRUNTIME_VERSION)
for Triton -> ONNX Runtime; ONNX Runtime's docs/Versioning.md for ONNX Runtime -> ONNX release; onnx's own
`onnx.helper.VERSION_TABLE` for ONNX release -> max opset / IR version.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from modelship.contract.errors import UsageError


class OnnxExporter(StrEnum):
    """Which of torch's exporters writes an ONNX graph: torch.export based (dynamo, the default) or TorchScript based
    (legacy: what torchvision's detectors need, and the eager-attention graph ONNX Runtime's optimizer fuses)."""

    DYNAMO = "dynamo"
    LEGACY = "legacy"


MIN_OPSET = 17  # LayerNormalization entered the default domain at 17; the dynamo exporter targets 18+


@dataclass(frozen=True)
class RuntimeTarget:
    """One Triton release and the ONNX Runtime inside its onnxruntime backend."""

    triton: str  # server version, e.g. "2.51.0"
    container: str  # NGC container tag, e.g. "24.10"
    onnxruntime: str  # the ONNX Runtime its onnxruntime backend embeds (the compatibility test installs it)
    onnx: str  # the ONNX release that ONNX Runtime implements
    max_opset: int
    max_ir_version: int
    libtorch: str  # the PyTorch its LibTorch backend is built on (`make compat` installs it)

    @property
    def image(self) -> str:
        """The stock container serving this release (the command `modelship serve` prints)."""
        return f"nvcr.io/nvidia/tritonserver:{self.container}-py3"


# Triton release -> ONNX Runtime -> ONNX release -> highest default-domain opset and IR version it loads.
# Only rows checked against the sources above; add a release once its ONNX Runtime version is confirmed.
TARGETS: dict[str, RuntimeTarget] = {
    t.triton: t
    for t in (
        RuntimeTarget("2.50.0", "24.09", "1.19.2", "1.16", 21, 10, "2.5.0"),
        RuntimeTarget("2.51.0", "24.10", "1.19.2", "1.16", 21, 10, "2.5.0"),
    )
}
# THE Triton target: the release nvidia-pytriton 0.7.0 bundles and the project publishes for. It drives the opset
# cap of exports, the ONNX Runtime and PyTorch versions of the compatibility tests, and the printed container.
DEFAULT_TRITON = "2.51.0"


def runtime_target(triton: str = DEFAULT_TRITON) -> RuntimeTarget:
    """The target for a Triton release given as "2.51", "2.51.0" or its container tag "24.10"."""
    for target in TARGETS.values():
        if triton in (target.triton, target.triton.rsplit(".", 1)[0], target.container):
            return target
    raise UsageError(f"unknown Triton release {triton!r}", hint=f"known: {', '.join(TARGETS)}")


def resolve_opset(requested: int | None, target: RuntimeTarget, exporter_max: int | None = None) -> int:
    """The opset to export at: `requested` if the target (and the exporter) can handle it, else the highest both
    can."""
    highest = min(target.max_opset, exporter_max or target.max_opset)
    if requested is None:
        return highest
    if not MIN_OPSET <= requested <= highest:
        raise UsageError(
            f"--opset {requested} is outside {MIN_OPSET}..{highest}",
            hint=f"Triton {target.triton} runs ONNX Runtime {target.onnxruntime}, which loads opsets up to "
            f"{target.max_opset}" + (f"; this exporter writes up to {exporter_max}" if exporter_max else ""),
        )
    return requested
