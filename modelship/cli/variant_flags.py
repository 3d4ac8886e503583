"""export-model's format and precision flags (`--torchscript`, `--onnx`, `--pt2`, `--fp16`, `--int8`, ...),
generated from the registries (contract.artifacts.EXPORT_FORMATS, contract.precisions.PRECISIONS) each time a
command line is parsed or `--help` is shown, so a format or precision registered later (a plugin's, a test's) has
its flag. They reach the command through `chosen()`, never as arguments of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from modelship.cli.main import GuardedCommand
from modelship.contract.artifacts import export_format_flags
from modelship.contract.precisions import variant_precisions

META = "modelship.variant_flags"  # ctx.meta key: the generated flags given, by name
FORMAT, PRECISION = "format", "precision"


@dataclass(frozen=True)
class VariantChoice:
    """The format flags and the precision flags given, in registry order."""

    formats: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()


def _given(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value and param.name:
        ctx.meta.setdefault(META, []).append(param.name)
    return value


def generated_options() -> list[click.Option]:
    """One flag per registered export format and per precision that has variants."""
    options = [
        click.Option([f"{FORMAT}__{f.name}", f.flag], is_flag=True, expose_value=False, callback=_given, help=f.help)
        for f in export_format_flags()
    ]
    options += [
        click.Option([f"{PRECISION}__{p.name}", p.flag], is_flag=True, expose_value=False, callback=_given, help=p.help)
        for p in variant_precisions()
        if p.flag
    ]
    return options


def chosen(ctx: click.Context | None = None) -> VariantChoice:
    """What the generated flags asked for on this command line."""
    given = (ctx or click.get_current_context()).meta.get(META, [])

    def pick(kind: str) -> tuple[str, ...]:
        return tuple(name.split("__", 1)[1] for name in given if name.startswith(f"{kind}__"))

    return VariantChoice(pick(FORMAT), pick(PRECISION))


class VariantFlagsCommand(GuardedCommand):
    """A command with the generated flags listed right after its arguments."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params: list[Any] = super().get_params(ctx)
        first_option = next((i for i, p in enumerate(params) if isinstance(p, click.Option)), len(params))
        return [*params[:first_option], *generated_options(), *params[first_option:]]
