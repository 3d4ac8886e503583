"""`--checkpoints DIR`: the user's own checkpoints, described by DIR/checkpoints.toml (format in docs/parity.md).

[[checkpoint]]
file = "resnet50-ft.pt"                      # relative to DIR
name = "resnet50_ft"                         # optional; default: the file's stem
export_args = ["--arch", "resnet50", "--arch-kwargs", '{"num_classes": 37}', "--onnx", "--fp16"]
parity_args = ["--atol", "1e-3"]             # optional extra `modelship parity` arguments
images = true                                # optional: true, false, or a folder of images relative to DIR
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "checkpoints.toml"
FIELDS = {"file", "name", "export_args", "parity_args", "images"}


@dataclass(frozen=True)
class OwnCheckpoint:
    name: str
    file: Path
    export_args: tuple[str, ...]
    parity_args: tuple[str, ...] = ()
    images: bool | Path | None = None  # None: when the export has a preprocessing spec


def read_checkpoints(folder: Path) -> list[OwnCheckpoint]:
    """Every `[[checkpoint]]` of folder/checkpoints.toml; ValueError naming the file and entry when one is wrong."""
    path = Path(folder) / MANIFEST
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: not found (--checkpoints needs a {MANIFEST} describing each checkpoint)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    if set(data) - {"checkpoint"} or not isinstance(data.get("checkpoint"), list) or not data["checkpoint"]:
        raise ValueError(f"{path}: expected one or more [[checkpoint]] tables and nothing else")
    entries = [_entry(path, i, table) for i, table in enumerate(data["checkpoint"])]
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate checkpoint names {duplicates} (set `name` for each)")
    return entries


def _entry(path: Path, index: int, table: dict) -> OwnCheckpoint:
    where = f"{path}: [[checkpoint]] #{index + 1}"
    unknown = sorted(set(table) - FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown} (known: {sorted(FIELDS)})")
    if not isinstance(table.get("file"), str):
        raise ValueError(f"{where}: `file` (the checkpoint, relative to {path.parent}) is required")
    file = path.parent / table["file"]
    if not file.is_file():
        raise ValueError(f"{where}: checkpoint {file} not found")
    lists = {}
    for key in ("export_args", "parity_args"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: `{key}` must be a list of strings, got {value!r}")
        lists[key] = tuple(value)
    images = table.get("images")
    if isinstance(images, str):
        images = path.parent / images
        if not images.is_dir():
            raise ValueError(f"{where}: images folder {images} not found")
    elif images is not None and not isinstance(images, bool):
        raise ValueError(f"{where}: `images` must be true, false or a folder, got {images!r}")
    return OwnCheckpoint(table.get("name") or file.stem, file, lists["export_args"], lists["parity_args"], images)
