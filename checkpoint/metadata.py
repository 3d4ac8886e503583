"""What a checkpoint says about itself: METADATA_KEYS stored beside the weights (or in a safetensors header), and
the `<checkpoint>.json` sidecar that carries the same fields for files that cannot hold them; read once into one
typed value, `CheckpointMetadata`, when the checkpoint is loaded."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from modelship.checkpoint.reading import METADATA_KEYS, RawCheckpoint
from modelship.contract.errors import CheckpointError, ModelshipError, PreprocessError
from modelship.contract.iospec import IOSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.jsonfile import read_json_object
from modelship.contract.labels import clean_labels
from modelship.contract.preprocessing import PreprocessSpec


@dataclass(frozen=True)
class CheckpointMetadata:
    """What a checkpoint says about its model beyond the weights, checked once: its inputs and outputs, its
    preprocessing, its class labels (one line each) and the task it was made for (a Hugging Face folder's head)."""

    io: IOSpec | None = None
    preprocess: PreprocessSpec | None = None
    labels: list[str] | None = None
    task: str | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any], source: str, notes: list[str]) -> CheckpointMetadata:
        """The metadata fields of `data` (a checkpoint's, a sidecar's), typed; a CheckpointError naming a field
        later steps cannot use. A label with a line break gets a space instead, said in `notes`."""
        labels = None
        if data.get("labels") is not None:
            labels, changed = clean_labels(data["labels"], f"{source}: metadata field 'labels'")
            if changed:
                shown = ", ".join(map(str, changed[:8])) + (", ..." if len(changed) > 8 else "")
                notes.append(f"labels {shown}: line breaks replaced by spaces (labels.txt has one line per class)")
        return cls(_io(data.get("io"), source), _preprocess(data.get("preprocess"), source), labels, data.get("task"))

    def to_dict(self) -> JsonObject:
        """The fields it holds, as a checkpoint's metadata writes them."""
        fields = {
            "io": self.io.to_dict() if self.io else None,
            "preprocess": self.preprocess.to_dict() if self.preprocess else None,
            "labels": self.labels,
            "task": self.task,
        }
        return {key: value for key, value in fields.items() if value is not None}


def _io(data: Any, source: str) -> IOSpec | None:
    if data is None:
        return None
    try:
        return IOSpec.from_dict(data)
    except ModelshipError as exc:
        raise CheckpointError(f"{source}: metadata field 'io' is invalid: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(
            f"{source}: metadata field 'io' is not an I/O spec ({type(exc).__name__}: {exc})",
            hint="see 'Metadata' in docs/checkpoints.md, or describe the inputs with --input",
        ) from None


def _preprocess(data: Any, source: str) -> PreprocessSpec | None:
    if data is None:
        return None
    try:
        return PreprocessSpec.from_dict(data)
    except PreprocessError as exc:
        raise CheckpointError(
            f"{source}: metadata field 'preprocess' is invalid: {exc.message}",
            hint=exc.hint or "see 'Metadata' in docs/checkpoints.md",
        ) from None


def checkpoint_metadata(raw: RawCheckpoint) -> JsonObject:
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


def read_sidecar(checkpoint: Path) -> JsonObject:
    path = sidecar_path(checkpoint)
    if not path.exists():
        return {}
    return read_json_object(path, "sidecar", error=CheckpointError, hint="fix or delete it (see docs/checkpoints.md)")


def write_sidecar(ckpt_path: Path | str, arch: str, arch_kwargs: JsonObject | None = None, **extra: Any) -> Path:
    """Write `<ckpt>.json` with `arch`, `arch_kwargs` and any extra metadata (io, preprocess, labels, ...)."""
    path = sidecar_path(Path(ckpt_path))
    payload = {"arch": arch, "arch_kwargs": dict(arch_kwargs or {}), **extra}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path
