"""export-model's format and precision flags (`--torchscript`, `--onnx`, `--pt2`, `--fp16`, `--int8`, ...) and each
precision's own option flags (`--fp16-io`, `--calibrate`, `--int8-cpu`, ...), generated from the registries
(contract.artifacts.EXPORT_FORMATS, contract.precisions.PRECISIONS, the options classes of
export.precision.registry) each time a command line is parsed or `--help` is shown, so a format, precision or
option registered later (a plugin's, a test's) has its flag. They reach the command through `chosen()`, never as
arguments of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from modelship.cli.main import GuardedCommand
from modelship.contract.precisions import variant_precisions
from modelship.export.formats import export_format_flags
from modelship.export.precision.registry import FlagKind, OptionFlag, VariantOptions, options_classes

META = "modelship.variant_flags"  # ctx.meta key: the generated flags given, by name
OPTIONS = "modelship.variant_options"  # ctx.meta key: each options class's values, by field
FORMAT, PRECISION = "format", "precision"


@dataclass(frozen=True)
class VariantChoice:
    """The format flags and the precision flags given, in registry order, and each precision's options."""

    formats: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()
    options: tuple[VariantOptions, ...] = ()


def _given(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value and param.name:
        ctx.meta.setdefault(META, []).append(param.name)
    return value


def generated_options() -> list[click.Option]:
    """One flag per registered export format and per precision that has variants, then each precision's options."""
    options = [
        click.Option([f"{FORMAT}__{f.name}", f.flag], is_flag=True, expose_value=False, callback=_given, help=f.help)
        for f in export_format_flags()
    ]
    options += [
        click.Option([f"{PRECISION}__{p.name}", p.flag], is_flag=True, expose_value=False, callback=_given, help=p.help)
        for p in variant_precisions()
        if p.flag
    ]
    return options + [_option(kind, name, flag) for kind in options_classes() for name, flag in kind.flags()]


def _option(kind: type[VariantOptions], name: str, flag: OptionFlag) -> click.Option:
    """The click option of one field of a precision's options; its value is kept for `chosen()`."""

    def keep(ctx: click.Context, param: click.Parameter, value: object) -> object:
        ctx.meta.setdefault(OPTIONS, {}).setdefault(kind, {})[name] = value
        return value

    extras: dict[FlagKind, dict[str, Any]] = {  # click.Option's keyword arguments, by kind
        FlagKind.SWITCH: {"is_flag": True},
        FlagKind.PATH: {"type": click.Path(path_type=Path), "default": None},
        FlagKind.CHOICE: {"type": click.Choice(list(flag.choices)), "default": None},
        FlagKind.REPEATED: {"multiple": True},
    }
    decl = f"{kind.precision}__{name}"
    return click.Option([decl, flag.flag], expose_value=False, callback=keep, help=flag.help, metavar=flag.metavar,
                        **extras[flag.kind])  # fmt: skip


def chosen(ctx: click.Context | None = None) -> VariantChoice:
    """What the generated flags asked for on this command line."""
    given = (ctx or click.get_current_context()).meta.get(META, [])

    def pick(kind: str) -> tuple[str, ...]:
        return tuple(name.split("__", 1)[1] for name in given if name.startswith(f"{kind}__"))

    values = (ctx or click.get_current_context()).meta.get(OPTIONS, {})
    options = tuple(kind(**{k: v for k, v in fields.items() if v not in (None, ())}) for kind, fields in values.items())
    return VariantChoice(pick(FORMAT), pick(PRECISION), options)


class VariantFlagsCommand(GuardedCommand):
    """A command with the generated flags listed right after its arguments."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params: list[Any] = super().get_params(ctx)
        first_option = next((i for i, p in enumerate(params) if isinstance(p, click.Option)), len(params))
        return [*params[:first_option], *generated_options(), *params[first_option:]]
