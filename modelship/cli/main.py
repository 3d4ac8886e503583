"""The `modelship` command group and the `export-model` entry point.

Subcommands are imported only when invoked, so `--help` stays fast and a client-only command never imports torch.
Every command is a `GuardedCommand`: a `ModelshipError` becomes one line on stderr (or one JSON object on stdout
with `--json`) and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import sys
from typing import Any

import click
from rich.console import Console

from modelship import __version__
from modelship.cli.numbers import MAX_BATCH
from modelship.contract.errors import ModelshipError
from modelship.contract.json_object import JsonObject

# name -> ("module:attribute" of a click.Command, one-line help shown by `modelship --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("modelship.cli.inspect:inspect_command", "Load a checkpoint, rebuild its model, report every key."),
    "export": ("modelship.cli.export:export_command", "Export TorchScript/ONNX (fp32, fp16) and verify parity."),
    "parity": ("modelship.cli.parity:parity_command", "Check an export's parity against PyTorch or golden data."),
    "parity-suite": ("modelship.cli.parity_suite:parity_suite_command", "Run the parity suite on your checkpoints."),
    "publish": ("modelship.cli.publish:publish_command", "Publish an export to a Triton model repository."),
    "serve": ("modelship.cli.serve:serve_command", "Serve a model repository with a local Triton server."),
    "infer": ("modelship.cli.infer:infer_command", "Classify images with a served model over HTTP or gRPC."),
    "tune": ("modelship.cli.tune:tune_command", "Choose the artifact and serving config by measurement, under a p99."),
    "rollout": ("modelship.cli.rollout:rollout_command", "Roll a version out to several Triton servers, with parity."),
    "deploy": ("modelship.cli.deploy:deploy_group", "Write KServe manifests for a repository in object storage."),
    "bench": ("modelship.cli.bench:bench_command", "Benchmark export, parity and serving; print ratios."),
}


LOG_WIDTH = 140  # rich's default of 80 columns truncates tables in CI logs and pipes


def make_console(*, stderr: bool = False, highlight: bool = True, soft_wrap: bool = False) -> Console:
    """A rich console; when not on a terminal (CI logs, pipes) it is wide enough that tables are not truncated."""
    stream = sys.stderr if stderr else sys.stdout
    width = LOG_WIDTH if not stream.isatty() and "COLUMNS" not in os.environ else None
    return Console(stderr=stderr, highlight=highlight, soft_wrap=soft_wrap, width=width)


def emit_json(payload: JsonObject) -> None:
    """Write the single JSON object a `--json` command owes stdout."""
    click.echo(json.dumps(payload, indent=2, default=str))


class GuardedCommand(click.Command):
    """A command whose user errors end as one actionable line and a non-zero exit code."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any):
        wants_json = "--json" in args
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # a bad flag: with --json, still exactly one JSON object on stdout
            if not wants_json:
                raise
            emit_json({"ok": False, "error": exc.format_message()})
            raise click.exceptions.Exit(exc.exit_code) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ModelshipError as exc:
            if ctx.params.get("as_json"):
                emit_json({"ok": False, "error": str(exc), **exc.details})
            else:
                click.secho(f"error: {exc}", fg="red", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except OSError as exc:  # the filesystem or the network said no: name the path and what to do
            error = system_error(exc)
            if ctx.params.get("as_json"):
                emit_json({"ok": False, "error": str(error), **error.details})
            else:
                click.secho(f"error: {error}", fg="red", err=True)
            ctx.exit(error.exit_code)


_ERRNO_HINTS = {
    errno.ENOSPC: "free some space, or write elsewhere",
    errno.EDQUOT: "free some space, or write elsewhere",
    errno.EROFS: "the filesystem is read-only: write elsewhere",
    errno.EACCES: "check the permissions, or write elsewhere",
    errno.EPERM: "check the permissions, or write elsewhere",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "pass a file, not a folder",
    errno.EMFILE: "raise the open-file limit (ulimit -n)",
}


def system_error(exc: OSError) -> ModelshipError:
    """An OSError as a ModelshipError: the path, the system's reason, and a hint chosen by errno."""
    where = f"{exc.filename}: " if exc.filename else ""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return ModelshipError(f"{where}{reason}", hint=_ERRNO_HINTS.get(exc.errno or 0), details={"errno": exc.errno})


def parse_batch_sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    """Click callback for a `--batch-sizes 1,8` option: positive integers, comma-separated."""
    try:
        sizes = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not sizes or any(not 1 <= b <= MAX_BATCH for b in sizes):
        raise click.BadParameter(f"batch sizes must be from 1 to {MAX_BATCH}, got {value!r}")
    return sizes


def json_option(func: Any) -> Any:
    """The `--json` flag, stored as `as_json`, shared by every command."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print exactly one JSON object on stdout (also on failure)."
    )(func)


class LazyGroup(click.Group):
    """Imports a subcommand's module only when that subcommand runs (torch takes seconds to import)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[cmd_name][0].split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="modelship")
def main() -> None:
    """modelship: PyTorch checkpoint -> TorchScript/ONNX (fp32, fp16) -> Triton, with parity proven at every step.

    \b
    Typical flow:
      modelship inspect ckpt.pt            what is in the checkpoint, which architecture it rebuilds
      export-model ckpt.pt --onnx --fp16   export and verify against eager PyTorch
      modelship publish exports/ckpt       write a Triton model repository (model_repo/)
      modelship serve                      serve it with a local Triton server
      modelship infer img.jpg --model M    classify images over HTTP or gRPC
    """


def export_model_main() -> None:
    """Console entry point `export-model`, the same command as `modelship export`."""
    command = main.get_command(click.Context(main), "export")
    assert command is not None
    command.main(prog_name="export-model")
