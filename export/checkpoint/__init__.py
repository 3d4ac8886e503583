"""Checkpoint loading: safe reading, architecture resolution, key mapping, strict matching (see docs/checkpoints.md)."""

from modelship.export.checkpoint.loader import LoadedModel, LoadOptions, load_model
from modelship.export.checkpoint.reading import METADATA_KEYS, read_sidecar, sidecar_path, write_sidecar
from modelship.export.checkpoint.report import LoadReport

__all__ = [
    "METADATA_KEYS",
    "LoadOptions",
    "LoadReport",
    "LoadedModel",
    "load_model",
    "read_sidecar",
    "sidecar_path",
    "write_sidecar",
]
