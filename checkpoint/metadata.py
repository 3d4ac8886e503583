"""What a checkpoint says about itself: METADATA_KEYS stored beside the weights (or in a safetensors header), and
the `<checkpoint>.json` sidecar that carries the same fields for files that cannot hold them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from modelship.checkpoint.reading import METADATA_KEYS, RawCheckpoint
from modelship.contract.errors import CheckpointError
from modelship.contract.jsonfile import read_json_object


def checkpoint_metadata(raw: RawCheckpoint) -> dict[str, Any]:
    """Metadata stored in the checkpoint: METADATA_KEYS beside the weights, or in the safetensors header.

    Lightning's `hyper_parameters['arch']` (and `arch_kwargs`) count too when no top-level `arch` is present.
    """
    if raw.header_metadata:
        return {k: _maybe_json(v) for k, v in raw.header_metadata.items() if k in METADATA_KEYS}
    content = raw.content
    if not isinstance(content, Mapping):
        return {}
    found = {k: content[k] for k in METADATA_KEYS if k in content and not isinstance(content[k], torch.Tensor)}
    hparams = content.get("hyper_parameters")
    if "arch" not in found and isinstance(hparams, Mapping) and isinstance(hparams.get("arch"), str):
        found["arch"] = hparams["arch"]
        if isinstance(hparams.get("arch_kwargs"), Mapping):
            found["arch_kwargs"] = dict(hparams["arch_kwargs"])
    return found


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def sidecar_path(checkpoint: Path) -> Path:
    """`model.pt` -> `model.pt.json`."""
    return checkpoint.with_name(checkpoint.name + ".json")


def read_sidecar(checkpoint: Path) -> dict[str, Any]:
    path = sidecar_path(checkpoint)
    if not path.exists():
        return {}
    return read_json_object(path, "sidecar", error=CheckpointError, hint="fix or delete it (see docs/checkpoints.md)")


def write_sidecar(ckpt_path: Path | str, arch: str, arch_kwargs: dict[str, Any] | None = None, **extra: Any) -> Path:
    """Write `<ckpt>.json` with `arch`, `arch_kwargs` and any extra metadata (io, preprocess, labels, ...)."""
    path = sidecar_path(Path(ckpt_path))
    payload = {"arch": arch, "arch_kwargs": dict(arch_kwargs or {}), **extra}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path
