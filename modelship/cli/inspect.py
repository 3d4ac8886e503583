"""`modelship inspect CKPT`: what is in a checkpoint, which model it rebuilds, and every key change on the way."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from modelship.cli.load_view import fingerprint_progress, print_container, print_load_report
from modelship.cli.loader_options import load_flags
from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.contract.errors import ModelshipError

if TYPE_CHECKING:
    from modelship.checkpoint import LoadOptions, LoadReport


@click.command("inspect", cls=GuardedCommand)
@load_flags
@json_option
def inspect_command(load: LoadOptions, as_json: bool) -> None:
    """Load CKPT safely, rebuild its model and report the container, the weights, the architecture (and how it was
    resolved) and every rename, drop and mismatch. Exits 0 only when the weights load strictly.

    \b
    Examples:
      modelship inspect model.pt
      modelship inspect last.ckpt --arch resnet50 --arch-kwargs '{"num_classes": 10}'
      modelship inspect ft.pth --arch timm/vit_tiny_patch16_224 --allow-missing 'head.*' --json
    """
    from modelship.checkpoint import LoadReport, load_model

    report = LoadReport(checkpoint=str(load.checkpoint))
    try:
        loaded = load_model(load, progress=None if as_json else fingerprint_progress())
    except ModelshipError as exc:
        exc.details = {**report.to_dict(), **exc.details}
        if not as_json and exc.details.get("sha256"):
            _print_report(LoadReport.from_dict(exc.details))
        raise
    if as_json:
        emit_json(loaded.report.to_dict())
    else:
        _print_report(loaded.report)


def _print_report(r: LoadReport) -> None:
    console = make_console(highlight=False, soft_wrap=True)
    print_container(console, r)
    print_load_report(console, r)
