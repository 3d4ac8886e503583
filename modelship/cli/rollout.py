"""`modelship rollout NAME --version N --server URL... --export DIR`: one version to a fleet of Triton servers,
proven by served parity on each, withdrawn everywhere if any server fails (serve.rollout)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.cli.numbers import SECONDS, count, whole
from modelship.cli.server_flags import api_key_files_option
from modelship.contract.errors import ServeError, UsageError


@click.command("rollout", cls=GuardedCommand)
@click.argument("model", metavar="NAME")
@click.option(
    "--version", type=count(2**63 - 1), required=True, help="The version to roll out (already in the repository)."
)
@click.option(
    "--server",
    "servers",
    multiple=True,
    required=True,
    metavar="URL",
    help="HTTP address of one Triton server of the fleet (repeat for each); all read the same repository in "
    "explicit model-control mode.",
)
@click.option(
    "--export",
    "export_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="The export folder the version was published from: its golden data proves each server.",
)
@api_key_files_option()
@click.option(
    "--canary", type=whole(0, 10_000), default=0, show_default=True, help="Roll out to the first K servers first."
)
@click.option("--timeout", "timeout_s", type=SECONDS, default=120.0, show_default=True, help="Seconds per load.")
@json_option
def rollout_command(
    model: str,
    version: int,
    servers: tuple[str, ...],
    export_dir: Path,
    key_files: tuple[Path, ...],
    canary: int,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Load version N of NAME on every --server, run served parity against the export's golden data on each, and
    keep it only if all pass; otherwise return every server to the version it served before and exit 1.

    \b
    Example:
      modelship rollout resnet50_onnx --version 3 --export exports/resnet50 \\
          --server http://triton-0:8000 --server http://triton-1:8000 --api-key-file secret --canary 1
    """
    from modelship.serve.rollout import Target, rollout

    if len(key_files) not in (0, 1, len(servers)):
        raise UsageError(f"{len(key_files)} --api-key-file for {len(servers)} --server", hint="give one, or one each")
    if canary < 0:
        raise UsageError(f"--canary must be >= 0, got {canary}")
    keys = [f.read_text().strip() for f in key_files]
    targets = [Target(url, keys[i] if len(keys) > 1 else (keys[0] if keys else None)) for i, url in enumerate(servers)]
    result = rollout(model, version, targets, export_dir, canary=canary, timeout_s=timeout_s)
    payload = result.to_dict()
    if not as_json:
        table = Table(title=f"rollout {model} version {version}")
        for column in ("server", "before", "load s", "parity", "now", "error"):
            table.add_column(column)
        for s in result.servers:
            load = "-" if s.load_s is None else f"{s.load_s:.1f}"
            table.add_row(s.server, str(s.previous or "latest"), load, s.parity, s.final, s.error or "")
        make_console().print(table)
    if not result.ok:
        failed = [s for s in result.servers if s.error or s.parity.startswith("FAIL")]
        why = failed[0].error or failed[0].parity if failed else "unknown"
        unrestored = [s.server for s in result.servers if s.final.startswith("rollback failed")]
        after = f"could not roll back {', '.join(unrestored)}" if unrestored else "the others were rolled back"
        raise ServeError(
            f"rollout of {model} version {version} failed on {failed[0].server if failed else '?'}: {why}; {after}",
            hint="see the table (or --json) for every server",
            details={k: v for k, v in payload.items() if k != "ok"},
        )
    if as_json:
        emit_json(payload)
    else:
        click.echo(f"{model} version {version} serving on all {len(result.servers)} servers, parity passed on each")
