"""Checkpoint loading: safe reading, architecture resolution, key mapping, strict matching (see docs/checkpoints.md)."""

from modelship.checkpoint.load_report import LoadReport
from modelship.checkpoint.loader import LoadedModel, LoadOptions, load_model
from modelship.checkpoint.metadata import METADATA_KEYS, read_sidecar, sidecar_path, write_sidecar

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
