"""The tolerance flags, defined once with one meaning for every command that judges artifacts (`export-model`,
`modelship parity`): `--atol`/`--rtol` for fp32 artifacts, `--fp16-atol`/`--fp16-rtol` for fp16 ones, and a
`--tolerances` JSON file under them. They reach the command as one `ToleranceOverrides`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.flags import flag_group

if TYPE_CHECKING:
    from modelship.parity import ToleranceOverrides

FLAGS = {"fp32.atol": "--atol", "fp32.rtol": "--rtol", "fp16.atol": "--fp16-atol", "fp16.rtol": "--fp16-rtol"}


def _overrides(
    atol: float | None,
    rtol: float | None,
    fp16_atol: float | None,
    fp16_rtol: float | None,
    tolerances: Path | None,
) -> ToleranceOverrides:
    from modelship.parity import ToleranceOverrides

    values = {("fp32", "atol"): atol, ("fp32", "rtol"): rtol, ("fp16", "atol"): fp16_atol, ("fp16", "rtol"): fp16_rtol}
    by_precision: dict[str, dict[str, float]] = {"fp32": {}, "fp16": {}}
    for (precision, field), value in values.items():
        if value is not None:
            by_precision[precision][field] = value
    return ToleranceOverrides(file=tolerances, by_precision=by_precision, flags=FLAGS)


tolerance_flags = flag_group(
    "tolerances",
    [
        click.option("--atol", type=float, default=None, help="fp32 absolute tolerance (default 1e-3)."),
        click.option("--rtol", type=float, default=None, help="fp32 relative tolerance (default 1e-3)."),
        click.option("--fp16-atol", type=float, default=None, help="fp16 absolute tolerance (default 1e-1)."),
        click.option("--fp16-rtol", type=float, default=None, help="fp16 relative tolerance (default 5e-2)."),
        click.option(
            "--tolerances",
            type=click.Path(path_type=Path, dir_okay=False),
            metavar="FILE",
            help="JSON tolerances: fields atol, rtol, min_cosine, min_top1 and per_output {name: {...}}, "
            'optionally keyed by precision: {"fp16": {"atol": 0.1}}. The flags above apply on top.',
        ),
    ],
    _overrides,
)
