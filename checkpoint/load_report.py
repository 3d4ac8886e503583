"""`LoadReport`: everything `load_model` found and did, in the shape `modelship inspect --json` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class LoadReport:
    """What was in the checkpoint, where the weights came from, which architecture they rebuilt, every key change.

    Filled in step by step by `load_model`; a failed load carries the partial report in the error's `details`.
    """

    checkpoint: str
    sha256: str = ""
    format: str = ""
    size_bytes: int = 0
    container: list[dict[str, Any]] = field(default_factory=list)
    state_key: str | None = None
    ema: bool = False
    notes: list[str] = field(default_factory=list)
    tensors: int = 0
    parameters: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)
    arch: str | None = None
    arch_kwargs: dict[str, Any] = field(default_factory=dict)
    arch_source: str | None = None
    arch_detail: str = ""
    candidates: list[str] = field(default_factory=list)
    stripped_prefixes: dict[str, int] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    unused_key_map_rules: list[str] = field(default_factory=list)
    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    shape_mismatches: list[dict[str, Any]] = field(default_factory=list)
    allowed_missing: list[str] = field(default_factory=list)
    allowed_unexpected: list[str] = field(default_factory=list)
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)
    ok: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields; `error` only when the load failed."""
        data = asdict(self)
        if data["error"] is None:
            del data["error"]
        return data
