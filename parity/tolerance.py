"""How close is close enough, per output: each precision's default `Tolerance` (contract.precisions, where the
measured figures behind them are), overridden by a `--tolerances` file and flags, per output where asked."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelship.contract.errors import UsageError
from modelship.contract.jsonfile import read_json_object
from modelship.contract.precisions import get_precision, precision_names
from modelship.contract.tolerance import Tolerance

__all__ = ["Tolerance", "ToleranceConfig", "ToleranceOverrides", "read_overrides"]


@dataclass(frozen=True)
class ToleranceConfig:
    """A default tolerance and per-output exceptions (keyed by output name)."""

    default: Tolerance
    per_output: dict[str, Tolerance] = field(default_factory=dict)

    def for_output(self, name: str) -> Tolerance:
        return self.per_output.get(name, self.default)

    @classmethod
    def for_precision(
        cls, precision: str, overrides: dict[str, Any] | None = None, task: str | None = None
    ) -> ToleranceConfig:
        """The defaults of `precision` for `task` (contract.precisions), with `overrides` applied.

        `overrides` holds Tolerance fields (`{"atol": 1e-3}`) and/or `"per_output": {name: {fields}}`; per-output
        entries start from the (overridden) default. It may also be keyed by precision
        (`{"fp16": {...}, "fp32": {...}}`), as in a `--tolerances` file; only the matching key applies.
        """
        defaults = get_precision(precision).default_tolerance(task)
        known = precision_names()
        overrides = dict(overrides or {})
        if set(overrides) & set(known):
            stray = sorted(set(overrides) - set(known))
            if stray:
                raise UsageError(f"tolerances keyed by precision cannot also hold {', '.join(stray)}")
            overrides = dict(overrides.get(precision) or {})
        per_output = overrides.pop("per_output", None) or {}
        if not isinstance(per_output, dict):
            raise UsageError("tolerance 'per_output' must map output names to tolerance fields")
        default = defaults.updated(overrides)
        return cls(default, {name: default.updated(dict(values)) for name, values in per_output.items()})

    def with_score_edge(self, edge: float | None) -> ToleranceConfig:
        """Detections: `edge` (the model's score threshold) as the score edge wherever none was asked for."""
        if edge is None:
            return self

        def edged(tolerance: Tolerance) -> Tolerance:
            return tolerance if tolerance.score_edge is not None else replace(tolerance, score_edge=edge)

        return ToleranceConfig(edged(self.default), {name: edged(t) for name, t in self.per_output.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"default": self.default.to_dict(), "per_output": {k: v.to_dict() for k, v in self.per_output.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToleranceConfig:
        return cls(
            Tolerance(**data["default"]),
            {name: Tolerance(**values) for name, values in (data.get("per_output") or {}).items()},
        )


def read_overrides(path: Path) -> dict[str, Any]:
    """A `--tolerances` JSON file: Tolerance fields and `per_output`, optionally keyed by precision."""
    return read_json_object(path, "tolerance file", hint='e.g. {"fp16": {"atol": 0.1}}')


@dataclass(frozen=True)
class ToleranceOverrides:
    """Tolerances asked for on the command line, merged in one place for every command: a `--tolerances` file
    (flat, or keyed by precision) first, then `every` (flags for all precisions), then `by_precision` (flags for
    one precision). `flags` names the flag of each value, so a negative one is refused by its name."""

    file: Path | None = None
    every: dict[str, float] = field(default_factory=dict)
    by_precision: dict[str, dict[str, float]] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # "fp16.atol" / "atol" -> "--fp16-atol"

    def __post_init__(self) -> None:
        values = {**self.every, **{f"{p}.{k}": v for p, d in self.by_precision.items() for k, v in d.items()}}
        for key, value in values.items():
            if value < 0:
                raise UsageError(f"{self.flags.get(key, key)} must be >= 0, got {value}")

    def resolved(self) -> dict[str, dict[str, Any]]:
        """The overrides keyed by precision, as `ToleranceConfig.for_precision` and ExportSpec take them."""
        loaded = read_overrides(self.file) if self.file else {}
        known = precision_names()
        keyed = set(loaded) & set(known)
        if keyed and set(loaded) - set(known):
            stray = ", ".join(sorted(set(loaded) - set(known)))
            raise UsageError(f"{self.file}: tolerances keyed by precision cannot also hold {stray}")
        base = {p: dict(loaded.get(p) or {}) if keyed else dict(loaded) for p in known}
        return {p: {**base[p], **self.every, **self.by_precision.get(p, {})} for p in known}

    def config(self, precision: str, task: str | None = None) -> ToleranceConfig:
        return ToleranceConfig.for_precision(precision, self.resolved(), task)
