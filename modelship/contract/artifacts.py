"""Artifact kinds, written once: the formats export-model writes (and the flag that asks for each), the file each
artifact is written to, the variants of a format at another precision, the file Triton's backend loads for each
servable format, and the ONNX Runtime setting every fp16 session needs.

Everything here is declared without importing torch, so the command line (flags, `--help`, choices) is generated
from it as it is parsed. What builds and explains a variant lives in the export layer and is named here by import
path (`module:function`), imported only when an export runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from modelship.contract.precisions import PRECISIONS, get_precision
from modelship.contract.registry import Registry

ARTIFACT_FORMATS: Registry[tuple[str, ...]] = Registry("artifact format")  # a manifest's `format` -> its artifacts
EXPORT_FILES: Registry[str] = Registry("artifact")  # artifact name -> its file (also the manifest's artifact order)


@dataclass(frozen=True)
class ExportFormat:
    """A format export-model writes: `name` (its flag is `--<name>`), `title` for messages, the flag's `help`,
    whether a plain `export-model` (no format flag) writes it, and `order`: where its flag is listed."""

    name: str
    title: str
    help: str
    default: bool = False
    order: int = 100

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"


EXPORT_FORMATS: Registry[ExportFormat] = Registry("export format")


def register_export_format(export_format: ExportFormat) -> ExportFormat:
    return EXPORT_FORMATS.add(export_format.name, export_format)


def export_format_flags() -> list[ExportFormat]:
    return sorted(EXPORT_FORMATS.values(), key=lambda f: f.order)


def default_formats() -> tuple[str, ...]:
    """What export-model writes when no format flag says."""
    return tuple(f.name for f in export_format_flags() if f.default)


def format_title(name: str) -> str:
    return EXPORT_FORMATS[name].title if name in EXPORT_FORMATS else name


def artifact_order() -> list[str]:
    """Every artifact name, a format's variants right after its fp32 artifact: the order of a manifest."""
    return [name for names in ARTIFACT_FORMATS.values() for name in names]


def register_artifact_format(artifact_format: str, files: dict[str, str]) -> None:
    """A format's fp32 artifacts and the file each is written to in the export folder (a new format's module calls
    this beside `export.formats.register_format`)."""
    ARTIFACT_FORMATS.add(artifact_format, tuple(files))
    for name, file in files.items():
        EXPORT_FILES.add(name, file)


Hook = str | Callable[..., Any]


def resolve_hook(hook: Hook) -> Callable[..., Any]:
    """A callable, or the one a `module:function` path names (imported now)."""
    if callable(hook):
        return hook
    module, _, name = hook.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Variant:
    """An artifact of `format` at `precision` (not fp32), built from the format's verified fp32 artifact.

    `file`: where it is written; `build(build, written) -> Finish`: the export step (export layer; `written` is the
    fp32 artifact as its exporter wrote it); `check(spec, preprocess, tokenizer)`: refuses, before anything is
    exported, what it could not build (INT8 without calibration images); `explain(folder, artifact, model, io,
    inputs) -> Explanation`: how `--explain` localises a failure (None: compared as the format's fp32 artifact
    is); `triton_parameters`: the backend parameters its Triton config adds. Its details class, when it has its
    own, is registered with `contract.artifact_details.register_variant_details`; its tolerances and flag are its
    precision's."""

    format: str
    precision: str
    file: str
    build: Hook
    check: Hook | None = None
    explain: Hook | None = None
    triton_parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def name(self) -> str:
        return f"{self.format}_{self.precision}"


VARIANTS: Registry[Variant] = Registry("variant")  # artifact name (onnx_fp16) -> its variant


def register_variant(variant: Variant) -> Variant:
    """Register `variant` and its file (after its format's artifacts in the manifest's order)."""
    get_precision(variant.precision)
    VARIANTS.add(variant.name, variant)
    EXPORT_FILES.add(variant.name, variant.file)
    if variant.format in ARTIFACT_FORMATS and variant.name not in ARTIFACT_FORMATS[variant.format]:
        ARTIFACT_FORMATS[variant.format] = (*ARTIFACT_FORMATS[variant.format], variant.name)
    return variant


def unregister_variant(name: str) -> None:
    """Remove a variant and its file (a test's own)."""
    variant = VARIANTS.pop(name)
    EXPORT_FILES.pop(name, None)
    if variant.format in ARTIFACT_FORMATS:
        ARTIFACT_FORMATS[variant.format] = tuple(a for a in ARTIFACT_FORMATS[variant.format] if a != name)


def variants_of(artifact_format: str, precisions: tuple[str, ...]) -> list[Variant]:
    """The variants of `artifact_format` at `precisions`, in the order the precisions were registered."""
    order = list(PRECISIONS)
    chosen = [v for v in VARIANTS.values() if v.format == artifact_format and v.precision in precisions]
    return sorted(chosen, key=lambda v: order.index(v.precision))


def formats_with(precision: str) -> tuple[str, ...]:
    """The formats that have a variant at `precision`."""
    return tuple(dict.fromkeys(v.format for v in VARIANTS.values() if v.precision == precision))


register_export_format(
    ExportFormat(
        "torchscript",
        "TorchScript",
        "Export TorchScript (model.pt). Neither format flag: both, or what the model kind exports (ONNX alone for a "
        "Hugging Face folder: transformers models do not script).",
        default=True,
        order=0,
    )
)
register_export_format(
    ExportFormat(
        "onnx",
        "ONNX",
        "Export ONNX (model.onnx). Neither format flag: both, or what the model kind exports.",
        default=True,
        order=1,
    )
)
register_export_format(
    ExportFormat(
        "pt2",
        "torch.export",
        "Also export with torch.export: the ExportedProgram (model.pt2) and an AOTInductor package compiled from it "
        "(model.aoti.pt2), both verified. Publishing them needs a Triton whose PyTorch backend loads torch_aoti.",
        order=2,
    )
)
register_artifact_format("torchscript", {"torchscript": "model.pt"})
register_artifact_format("onnx", {"onnx": "model.onnx"})
register_artifact_format("pt2", {"pt2": "model.pt2"})
register_artifact_format("aoti", {"aoti": "model.aoti.pt2"})
# ONNX Runtime 1.31 segfaults creating a CPU session for some fp16 graphs (vit_b_16) unless this optimizer is off:
# every fp16 session (parity, the stand-in backend via the published config) disables it.
FP16_DISABLED_OPTIMIZERS = ("NchwcTransformer",)
register_variant(
    Variant("torchscript", "fp16", "model.fp16.pt", "modelship.export.formats.torchscript_format:start_fp16")
)
register_variant(
    Variant(
        "onnx",
        "fp16",
        "model.fp16.onnx",
        "modelship.export.fp16_strategy:start_onnx_fp16",
        explain="modelship.export.explain:explain_onnx_fp16",
        triton_parameters=MappingProxyType({"disabled_optimizers": ",".join(FP16_DISABLED_OPTIMIZERS)}),
    )
)
register_variant(
    Variant(
        "onnx",
        "int8",
        "model.int8.onnx",
        "modelship.export.int8_variant:start_onnx_int8",
        check="modelship.export.calibration:check_calibration",
        explain="modelship.export.explain:explain_onnx_int8",
    )
)
DEFAULT_FORMATS = default_formats()  # pt2 only when asked (--pt2): an AOTInductor compile takes a while
SERVED_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}  # format -> the file Triton's backend loads
PLATFORMS = {"onnx": "onnxruntime_onnx", "torchscript": "pytorch_libtorch"}  # format -> Triton platform
GOLDEN_FILE = "golden.npz"  # the verification inputs and eager outputs, beside the artifacts
SIDECAR_FILE = "checkpoint.json"  # the checkpoint's sidecar metadata, copied into the export
