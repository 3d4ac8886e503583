"""The exporters of the formats asked for, in the order they start (registry.FORMATS, filled by each format's
exporter.py: importing this module registers the built-in ones)."""

from __future__ import annotations

from modelship.export.formats.onnx import exporter as onnx_exporter  # noqa: F401 (the built-in exporters register)
from modelship.export.formats.pt2 import exporter as pt2_exporter  # noqa: F401
from modelship.export.formats.registry import FORMATS, FormatExporter
from modelship.export.formats.torchscript import exporter as torchscript_exporter  # noqa: F401


def export_formats() -> tuple[str, ...]:
    """Every format export-model has an exporter for, in the order they start: the built-in ones and any registered
    since."""
    return tuple(exporter.format for exporter in sorted(FORMATS.values(), key=lambda exporter: exporter.order))


def exporters_for(formats: tuple[str, ...]) -> list[FormatExporter]:
    """The exporters of `formats`, by `order` (a format without a flag is refused when ExportSpec is built, one
    without an exporter here)."""
    return sorted((FORMATS.find(name) for name in formats), key=lambda exporter: exporter.order)
