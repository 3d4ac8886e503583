"""`LoadReport`: everything `load_model` found and did, in the shape `modelship inspect --json` prints; and
`Findings`, what each loading step returned, from which the report is assembled."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from modelship.checkpoint.alignment import NOTHING_ALIGNED, KeyAlignment
from modelship.checkpoint.keymap import RenameSuggestion
from modelship.checkpoint.matching import ShapeMismatch
from modelship.checkpoint.reading import CheckpointFile, ContainerEntry, Selection, WeightStats
from modelship.checkpoint.resolve import ArchChoice
from modelship.contract.json_object import JsonObject


@dataclass(frozen=True)
class LoadReport:
    """What was in the checkpoint, where the weights came from, which architecture they rebuilt, every key change.

    Assembled by `Findings.report` from what the loading steps returned; a failed load carries the partial report
    (the steps it finished) in the error's `details`.
    """

    checkpoint: str
    sha256: str = ""
    format: str = ""
    size_bytes: int = 0
    container: tuple[ContainerEntry, ...] = ()
    state_key: str | None = None
    ema: bool = False
    notes: tuple[str, ...] = ()
    tensors: int = 0
    parameters: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)
    arch: str | None = None
    arch_kwargs: JsonObject = field(default_factory=dict)
    arch_source: str | None = None
    arch_detail: str = ""
    candidates: tuple[str, ...] = ()
    stripped_prefixes: dict[str, int] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    unused_key_map_rules: tuple[str, ...] = ()
    missing_keys: tuple[str, ...] = ()
    unexpected_keys: tuple[str, ...] = ()
    shape_mismatches: tuple[ShapeMismatch, ...] = ()
    allowed_missing: tuple[str, ...] = ()
    allowed_unexpected: tuple[str, ...] = ()
    suggestions: tuple[RenameSuggestion, ...] = ()
    nonfinite: tuple[str, ...] = ()
    ok: bool = False
    error: str | None = None

    def to_dict(self) -> JsonObject:
        """JSON-ready fields (sequences as lists); `error` only when the load failed."""
        data = {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}
        data["suggestions"] = [s.to_dict() for s in self.suggestions]
        if data["error"] is None:
            del data["error"]
        return data

    @classmethod
    def from_dict(cls, data: JsonObject) -> LoadReport:
        """The report `to_dict` wrote (a failed load's, from its error's details); other keys are left out."""
        names = {f.name for f in fields(cls)}
        found: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
        return replace(
            cls(**found),
            container=tuple(ContainerEntry(**e) for e in data.get("container", [])),
            shape_mismatches=tuple(ShapeMismatch(**m) for m in data.get("shape_mismatches", [])),
            suggestions=tuple(RenameSuggestion.from_dict(s) for s in data.get("suggestions", [])),
        )


@dataclass
class Findings:
    """What the loading steps of one checkpoint returned so far, each kept as the step returned it, and the notes
    they made in order; `report` assembles the `LoadReport` from them, whole after a load, partial after a failure."""

    checkpoint: str
    sha256: str = ""
    file: CheckpointFile | None = None
    selection: Selection | None = None
    weights: WeightStats | None = None
    arch: ArchChoice | None = None
    keys: KeyAlignment | None = None
    notes: list[str] = field(default_factory=list)

    def report(self, error: str | None = None) -> LoadReport:
        """The report of the steps so far: `ok` unless an `error` ended the load."""
        file = self.file or CheckpointFile("", 0, ())
        selection = self.selection or Selection({}, None, False)
        weights = self.weights or WeightStats(0, 0, {}, ())
        arch = self.arch
        keys = self.keys or NOTHING_ALIGNED
        return LoadReport(
            checkpoint=self.checkpoint,
            sha256=self.sha256,
            format=file.format,
            size_bytes=file.size_bytes,
            container=file.container,
            state_key=selection.state_key,
            ema=selection.ema,
            notes=tuple(self.notes),
            tensors=weights.tensors,
            parameters=weights.parameters,
            dtypes=weights.dtypes,
            arch=arch.arch if arch else None,
            arch_kwargs=arch.arch_kwargs if arch else {},
            arch_source=arch.source if arch else None,
            arch_detail=arch.detail if arch else "",
            candidates=arch.candidates if arch else (),
            stripped_prefixes=keys.stripped_prefixes,
            renamed=keys.renamed,
            dropped=keys.dropped,
            unused_key_map_rules=keys.unused_key_map_rules,
            missing_keys=keys.comparison.missing,
            unexpected_keys=keys.comparison.unexpected,
            shape_mismatches=keys.comparison.shape_mismatches,
            allowed_missing=keys.comparison.allowed_missing,
            allowed_unexpected=keys.comparison.allowed_unexpected,
            suggestions=keys.suggestions,
            nonfinite=weights.nonfinite,
            ok=error is None,
            error=error,
        )
