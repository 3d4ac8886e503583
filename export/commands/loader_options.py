"""The checkpoint-loading options shared by `inspect` and `export`: one decorator, one converter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from export.errors import UsageError

if TYPE_CHECKING:
    from export.checkpoint import LoadOptions

_OPTIONS = [
    click.argument("checkpoint", type=click.Path(path_type=Path), metavar="CKPT"),
    click.option(
        "--arch",
        metavar="NAME",
        help="Architecture to rebuild: a torchvision name (resnet50), timm/NAME (timm/vit_tiny_patch16_224) or "
        "package.module:Factory (class or function; the current folder is importable). Default: from the "
        "checkpoint's metadata, its <CKPT>.json sidecar, else recognised from key names and shapes.",
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
]


def loader_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add CKPT and the loader options to a click command (kwargs go to `load_options_from`)."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def load_options_from(params: dict[str, Any]) -> LoadOptions:
    """Build `LoadOptions` from the click kwargs of a command decorated with `loader_options`."""
    from export.checkpoint import LoadOptions  # imported here: torch is slow to import

    arch_kwargs = None
    if params.get("arch_kwargs"):
        try:
            arch_kwargs = json.loads(params["arch_kwargs"])
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"--arch-kwargs is not valid JSON ({exc.msg} at column {exc.colno}): {params['arch_kwargs']}",
                hint="write a JSON object, e.g. --arch-kwargs '{\"num_classes\": 10}'",
            ) from exc
        if not isinstance(arch_kwargs, dict):
            raise UsageError(
                f"--arch-kwargs must be a JSON object, got {params['arch_kwargs']}",
                hint="e.g. --arch-kwargs '{\"num_classes\": 10}'",
            )
    return LoadOptions(
        checkpoint=Path(params["checkpoint"]),
        arch=params.get("arch"),
        arch_kwargs=arch_kwargs,
        key_map=params.get("key_map"),
        state_key=params.get("state_key"),
        allow_missing=tuple(params.get("allow_missing") or ()),
        allow_unexpected=tuple(params.get("allow_unexpected") or ()),
        trust_checkpoint=bool(params.get("trust_checkpoint")),
    )
