"""How close is close enough, per output: each precision's default `Tolerance` (contract.precisions, where the
measured figures behind them are), overridden by a `--tolerances` file and flags, per output where asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.jsonfile import read_json_object
from modelship.contract.precisions import precision_names
from modelship.contract.tolerance import Tolerance, ToleranceConfig, keyed_by_precision

__all__ = ["Tolerance", "ToleranceConfig", "ToleranceOverrides", "read_overrides"]


def read_overrides(path: Path) -> JsonObject:
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

    def resolved(self) -> dict[str, JsonObject]:
        """The overrides keyed by precision, as `ToleranceConfig.for_precision` and ExportSpec take them."""
        loaded = read_overrides(self.file) if self.file else {}
        known = precision_names()
        keyed = keyed_by_precision(loaded, known, f"{self.file}: tolerances")
        base = {p: dict(loaded.get(p) or {}) if keyed else dict(loaded) for p in known}
        return {p: {**base[p], **self.every, **self.by_precision.get(p, {})} for p in known}

    def config(self, precision: str, task: str | None = None) -> ToleranceConfig:
        return ToleranceConfig.for_precision(precision, self.resolved(), task)
