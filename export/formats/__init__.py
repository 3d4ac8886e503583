"""One exporter per format, registered by name: `export-model` runs the exporter of each format asked for.

An exporter's `start(build)` writes its fp32 artifacts into the build's staging folder and verifies them,
returning one `Started` per artifact: what it wrote (the variants of that format are built from it:
contract.artifacts.Variant) and a `Finish` that gives the `BuiltArtifact` (waiting for a verification still
running on `build.background`, as TorchScript's do). Exporters start by `order`, lowest first, so one whose
verification overlaps the next export (TorchScript) goes first.

Adding a format is one module that calls `register_format` and, for its file names and flag,
`contract.artifacts.register_artifact_format` and `register_export_format` (tests/test_format_registry.py adds one
from inside a test).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from modelship.contract.registry import Registry
from modelship.export.build import Build, Finish, Started

__all__ = ["FORMATS", "Finish", "FormatExporter", "Started", "export_formats", "exporters_for", "register_format"]


@dataclass(frozen=True)
class FormatExporter:
    """`format`: the name `--torchscript` / `--onnx` / `--pt2` choose (ExportSpec.formats); `start(build)`: write
    and verify this format's fp32 artifacts; `order`: when it starts among the formats asked for."""

    format: str
    start: Callable[[Build], list[Started]]
    order: int = 100


FORMATS: Registry[FormatExporter] = Registry("export format")


def register_format(exporter: FormatExporter, *, replace: bool = False) -> FormatExporter:
    return FORMATS.add(exporter.format, exporter, replace=replace)


def export_formats() -> tuple[str, ...]:
    """Every format export-model can write: the built-in exporters and any registered since."""
    from modelship.export.formats import onnx_format, pt2_format, torchscript_format  # noqa: F401 (registration)

    return tuple(exporter.format for exporter in sorted(FORMATS.values(), key=lambda exporter: exporter.order))


def exporters_for(formats: tuple[str, ...]) -> list[FormatExporter]:
    """The exporters of `formats`, by `order` (an unknown format is refused when ExportSpec is built)."""
    export_formats()
    return sorted((FORMATS[name] for name in formats if name in FORMATS), key=lambda exporter: exporter.order)
