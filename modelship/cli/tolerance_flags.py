"""The tolerance flags, defined once with one meaning for every command that judges artifacts (`export-model`,
`modelship parity`): `--atol`/`--rtol` for fp32 artifacts and `--<precision>-atol`/`--<precision>-rtol` for each
other precision registered (`--fp16-atol`, `--int8-atol`: contract.precisions), and a `--tolerances` JSON file
under them. They reach the command as one `ToleranceOverrides`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.flags import Decorator, flag_group
from modelship.cli.numbers import at_least_zero
from modelship.contract.precisions import PRECISIONS, Precision

if TYPE_CHECKING:
    from modelship.parity import ToleranceOverrides

FIELDS = ("atol", "rtol")


def _param(precision: Precision, field: str) -> str:
    """The option's parameter name: atol, fp16_atol, int8_rtol."""
    return field if precision.name == "fp32" else f"{precision.name}_{field}"


def _flag(precision: Precision, field: str) -> str:
    return f"{precision.tolerance_flag}{field}"


def _option(precision: Precision, field: str) -> Decorator:
    default = getattr(precision.tolerance, field)
    what = "absolute" if field == "atol" else "relative"
    judged = "" if precision.tolerance.elementwise else ", a figure for the record, not a bar"
    return click.option(
        _flag(precision, field),
        _param(precision, field),
        type=at_least_zero(1e9),
        default=None,
        help=f"{precision.name} {what} tolerance (default {default:g}{judged}).",
    )


def _overrides(tolerances: Path | None, **values: float | None) -> ToleranceOverrides:
    from modelship.parity import ToleranceOverrides

    by_precision: dict[str, dict[str, float]] = {name: {} for name in PRECISIONS}
    flags = {}
    for precision in PRECISIONS.values():
        for field in FIELDS:
            flags[f"{precision.name}.{field}"] = _flag(precision, field)
            value = values.get(_param(precision, field))
            if value is not None:
                by_precision[precision.name][field] = value
    return ToleranceOverrides(file=tolerances, by_precision=by_precision, flags=flags)


tolerance_flags = flag_group(
    "tolerances",
    [
        *(_option(precision, field) for precision in PRECISIONS.values() for field in FIELDS),
        click.option(
            "--tolerances",
            type=click.Path(path_type=Path, dir_okay=False),
            metavar="FILE",
            help="JSON tolerances: fields atol, rtol, min_cosine, min_top1, min_top5 and per_output {name: {...}}, "
            'optionally keyed by precision: {"fp16": {"atol": 0.1}}. The flags above apply on top.',
        ),
    ],
    _overrides,
)
