"""`ToleranceConfig`: the bars an artifact is judged by, per output: its precision's defaults for the export's task
(contract.precisions) with a user's overrides applied (--atol, --fp16-atol, a --tolerances file); parity.tolerance
holds the measured defaults' story."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from modelship.contract.bars import Tolerance
from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.precisions import get_precision, precision_names

__all__ = ["Tolerance", "ToleranceConfig", "keyed_by_precision"]


def keyed_by_precision(overrides: JsonObject, precisions: Sequence[str], where: str = "tolerances") -> bool:
    """Whether `overrides` is keyed by precision (`{"fp16": {...}}`); a UsageError when it mixes precision keys with
    fields (`where` names the source)."""
    keyed = set(overrides) & set(precisions)
    stray = sorted(set(overrides) - set(precisions))
    if keyed and stray:
        raise UsageError(f"{where} keyed by precision cannot also hold {', '.join(stray)}")
    return bool(keyed)


@dataclass(frozen=True)
class ToleranceConfig:
    """A default tolerance and per-output exceptions (keyed by output name)."""

    default: Tolerance
    per_output: dict[str, Tolerance] = field(default_factory=dict)

    def for_output(self, name: str) -> Tolerance:
        return self.per_output.get(name, self.default)

    @classmethod
    def for_precision(
        cls, precision: str, overrides: JsonObject | None = None, task: str | None = None
    ) -> ToleranceConfig:
        """The defaults of `precision` for `task` (contract.precisions), with `overrides` applied.

        `overrides` holds Tolerance fields (`{"atol": 1e-3}`) and/or `"per_output": {name: {fields}}`; per-output
        entries start from the (overridden) default. It may also be keyed by precision
        (`{"fp16": {...}, "fp32": {...}}`), as in a `--tolerances` file; only the matching key applies.
        """
        defaults = get_precision(precision).default_tolerance(task)
        overrides = dict(overrides or {})
        if keyed_by_precision(overrides, precision_names()):
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

    def to_dict(self) -> JsonObject:
        return {"default": self.default.to_dict(), "per_output": {k: v.to_dict() for k, v in self.per_output.items()}}

    @classmethod
    def from_dict(cls, data: JsonObject) -> ToleranceConfig:
        return cls(
            Tolerance(**data["default"]),
            {name: Tolerance(**values) for name, values in (data.get("per_output") or {}).items()},
        )
