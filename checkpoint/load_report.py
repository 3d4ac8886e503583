"""`LoadReport`: everything `load_model` found and did, in the shape `modelship inspect --json` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from modelship.checkpoint.keymap import RenameSuggestion
from modelship.checkpoint.matching import ShapeMismatch
from modelship.checkpoint.reading import ContainerEntry
from modelship.contract.jsonfile import JsonObject


@dataclass
class LoadReport:
    """What was in the checkpoint, where the weights came from, which architecture they rebuilt, every key change.

    Filled in step by step by `load_model`; a failed load carries the partial report in the error's `details`.
    """

    checkpoint: str
    sha256: str = ""
    format: str = ""
    size_bytes: int = 0
    container: list[ContainerEntry] = field(default_factory=list)
    state_key: str | None = None
    ema: bool = False
    notes: list[str] = field(default_factory=list)
    tensors: int = 0
    parameters: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)
    arch: str | None = None
    arch_kwargs: JsonObject = field(default_factory=dict)
    arch_source: str | None = None
    arch_detail: str = ""
    candidates: list[str] = field(default_factory=list)
    stripped_prefixes: dict[str, int] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    unused_key_map_rules: list[str] = field(default_factory=list)
    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    shape_mismatches: list[ShapeMismatch] = field(default_factory=list)
    allowed_missing: list[str] = field(default_factory=list)
    allowed_unexpected: list[str] = field(default_factory=list)
    suggestions: list[RenameSuggestion] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)
    ok: bool = False
    error: str | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready fields; `error` only when the load failed."""
        data = asdict(self)
        data["suggestions"] = [s.to_dict() for s in self.suggestions]
        if data["error"] is None:
            del data["error"]
        return data

    @classmethod
    def from_dict(cls, data: JsonObject) -> LoadReport:
        """The report `to_dict` wrote (a failed load's, from its error's details); other keys are left out."""
        names = {f.name for f in fields(cls)}
        report = cls(**{k: v for k, v in data.items() if k in names})
        report.container = [ContainerEntry(**e) for e in data.get("container", [])]
        report.shape_mismatches = [ShapeMismatch(**m) for m in data.get("shape_mismatches", [])]
        report.suggestions = [RenameSuggestion.from_dict(s) for s in data.get("suggestions", [])]
        return report
