"""The checkpoint-loading flags shared by `inspect` and `export`: one flag group, built into `LoadOptions`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from modelship.cli.flags import flag_group
from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject

if TYPE_CHECKING:
    from modelship.checkpoint import LoadOptions

_OPTIONS = [
    click.argument("checkpoint", type=click.Path(path_type=Path), metavar="CKPT"),
    click.option(
        "--arch",
        metavar="NAME",
        help="Architecture to rebuild: a torchvision name (resnet50), timm/NAME (timm/vit_tiny_patch16_224), "
        "transformers/CLASS for a Hugging Face folder, or package.module:Factory (class or function; the current "
        "folder is importable). Default: from the checkpoint's metadata, its <CKPT>.json sidecar, a folder's "
        "config.json, else recognised from key names and shapes.",
    ),
    click.option(
        "--arch-kwargs",
        metavar="JSON",
        help="Keyword arguments for the architecture, as a JSON object, e.g. '{\"num_classes\": 10}'.",
    ),
    click.option(
        "--key-map",
        type=click.Path(path_type=Path),
        metavar="FILE",
        help="JSON or TOML file of key renames, regex rewrites and keys to drop (see docs/checkpoints.md).",
    ),
    click.option(
        "--state-key",
        metavar="KEY",
        help="Entry of the checkpoint dict holding the weights (dotted for nesting). Default: EMA weights if "
        "present, else state_dict / model / model_state_dict / module / net / network.",
    ),
    click.option(
        "--allow-missing",
        multiple=True,
        metavar="GLOB",
        help="Accept model keys absent from the checkpoint (e.g. 'fc.*' for a re-initialised head). Repeatable; "
        "reported, never silent.",
    ),
    click.option(
        "--allow-unexpected",
        multiple=True,
        metavar="GLOB",
        help="Accept checkpoint keys the model does not have (they are ignored). Repeatable; reported.",
    ),
    click.option(
        "--trust-checkpoint",
        is_flag=True,
        help="Fully unpickle a checkpoint that holds Python objects (e.g. a whole saved model). This runs code "
        "from the file: use only for files you trust.",
    ),
    click.option(
        "--keep-aux",
        is_flag=True,
        help="Keep a segmentation model's auxiliary head and export its 'aux' output (default: only 'out').",
    ),
]


def _load_options(
    checkpoint: Path,
    arch: str | None,
    arch_kwargs: str | None,
    key_map: Path | None,
    state_key: str | None,
    allow_missing: tuple[str, ...],
    allow_unexpected: tuple[str, ...],
    trust_checkpoint: bool,
    keep_aux: bool,
) -> LoadOptions:
    """`LoadOptions` from the loader flags (--arch-kwargs parsed and checked here)."""
    from modelship.checkpoint import LoadOptions, LoadReport  # imported here: torch is slow to import

    try:
        kwargs = _arch_kwargs(arch_kwargs) if arch_kwargs else None
    except UsageError as exc:  # like every load failure, it carries the load report (nothing loaded yet)
        exc.details = {**LoadReport(checkpoint=str(checkpoint), ok=False, error=str(exc)).to_dict(), **exc.details}
        raise
    return LoadOptions(
        checkpoint=Path(checkpoint),
        arch=arch,
        arch_kwargs=kwargs,
        key_map=key_map,
        state_key=state_key,
        allow_missing=tuple(allow_missing),
        allow_unexpected=tuple(allow_unexpected),
        trust_checkpoint=trust_checkpoint,
        keep_aux=keep_aux,
    )


def _arch_kwargs(text: str) -> JsonObject:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--arch-kwargs is not valid JSON ({exc.msg} at column {exc.colno}): {text}",
            hint="write a JSON object, e.g. --arch-kwargs '{\"num_classes\": 10}'",
        ) from exc
    if not isinstance(value, dict):
        raise UsageError(
            f"--arch-kwargs must be a JSON object, got {text}", hint="e.g. --arch-kwargs '{\"num_classes\": 10}'"
        )
    return value


# CKPT and the loader flags, reaching the command as `load: LoadOptions`
load_flags = flag_group("load", _OPTIONS, _load_options)
