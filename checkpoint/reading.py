"""Reading checkpoint files safely and finding the weights inside them.

Every torch file is read with `torch.load(weights_only=True)`: tensors, containers and a short list of data-only
classes (argparse.Namespace, numpy scalars) - never arbitrary objects. A file that needs more (a pickled whole
module, or anything with a code-carrying global) is refused unless the user passes `--trust-checkpoint`.
"""

from __future__ import annotations

import argparse
import os
import pickle
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file as load_safetensors

from modelship.contract.errors import CheckpointError, UsageError

METADATA_KEYS = ("arch", "arch_kwargs", "io", "preprocess", "labels")  # what may sit beside the weights
STATE_KEYS = ("state_dict", "model", "model_state_dict", "module", "net", "network")
EMA_KEYS = ("state_dict_ema", "model_ema", "ema")  # timm's order; EMA wins when present, as in timm

# Classes that training scripts put beside the weights and that rebuild from plain data without running code.
DATA_ONLY_GLOBALS: list[Any] = [
    argparse.Namespace,  # timm's train.py saves its args
    np.core.multiarray.scalar,  # type: ignore[attr-defined]  # numpy floats/ints logged as metrics (stubs: no np.core)
    np.dtype,
    *{type(np.dtype(code)) for code in "?bBhHiIlLqQefdgFDG"},
]


@dataclass
class RawCheckpoint:
    """One checkpoint file as read: its top-level object and, for safetensors, the header metadata."""

    path: Path
    format: str  # "torch" | "torch-legacy" | "safetensors" | "pickle (trusted)"
    content: Any
    header_metadata: dict[str, str] = field(default_factory=dict)
    trusted_module: torch.nn.Module | None = None


@dataclass(frozen=True)
class Selection:
    """The state dict chosen inside a checkpoint and why."""

    state_dict: dict[str, torch.Tensor]
    state_key: str | None
    ema: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightStats:
    """What the chosen tensors hold: how many, how many values, of which dtypes, and which are not finite."""

    tensors: int
    parameters: int
    dtypes: dict[str, int]
    nonfinite: tuple[str, ...]
    notes: tuple[str, ...] = ()


def is_safetensors(path: Path) -> bool:
    """True when the file starts with a safetensors header (8-byte length, then a JSON object)."""
    with path.open("rb") as handle:
        head = handle.read(9)
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < path.stat().st_size


def check_file(path: Path) -> None:
    """CheckpointError unless `path` is a readable, non-empty file."""
    if not path.exists():
        raise CheckpointError(f"{path}: no such file", hint="check the checkpoint path")
    if not path.is_file():
        raise CheckpointError(f"{path}: not a file", hint="pass the checkpoint file itself, not a folder")
    if not os.access(path, os.R_OK):
        raise CheckpointError(f"{path}: permission denied", hint="make the file readable (chmod +r) or copy it")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: the file is empty", hint="the save was interrupted; copy or save it again")


def read_checkpoint(path: Path, *, trust: bool = False) -> RawCheckpoint:
    """Read a checkpoint file without executing anything it contains (unless `trust`)."""
    check_file(path)
    if path.suffix == ".safetensors" or is_safetensors(path):
        return _read_safetensors(path)
    kind = _sniff(path)
    if kind is not None:
        raise CheckpointError(
            f"{path}: not a PyTorch checkpoint ({kind})",
            hint="pass the file written by torch.save(...) or safetensors, e.g. the .pt/.pth/.ckpt/.safetensors file",
        )
    return _read_torch(path, trust)


def _sniff(path: Path) -> str | None:
    """What a file that torch.save cannot have written looks like (None when it may be a torch file).

    torch.save writes a zip archive (torch >= 1.6) or a pickle stream starting with the PROTO opcode (legacy)."""
    with path.open("rb") as handle:
        head = handle.read(512)
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":  # a (maybe truncated) zip archive, or a pickle
        return None
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "it holds JSON text; a <checkpoint>.json sidecar goes beside the checkpoint, it is not one"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of the block read
            return "unrecognised binary data: neither a zip archive nor a pickle stream"
    return "it holds text"


def _read_safetensors(path: Path) -> RawCheckpoint:
    try:
        with safe_open(str(path), framework="pt") as handle:
            header = dict(handle.metadata() or {})
        tensors = load_safetensors(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{path}: not a readable safetensors file ({exc})", hint="the file is truncated or corrupt; save it again"
        ) from exc
    return RawCheckpoint(path, "safetensors", tensors, header_metadata=header)


def _read_torch(path: Path, trust: bool) -> RawCheckpoint:
    fmt = "torch" if zipfile.is_zipfile(path) else "torch-legacy"
    try:
        with torch.serialization.safe_globals(DATA_ONLY_GLOBALS):
            content = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" not in str(exc):
            raise _unreadable(path, exc) from exc
        unsafe = _unsafe_globals(path)
        if not unsafe:  # refused for its bytes, not for code it names: a damaged or foreign pickle
            raise _unreadable(path, exc) from None
        if not trust:
            raise _unsafe(path, unsafe) from None
        return _read_trusted(path)
    except (RuntimeError, EOFError, KeyError, ValueError, OSError) as exc:
        raise _unreadable(path, exc) from exc
    return RawCheckpoint(path, fmt, content)


def _unreadable(path: Path, exc: BaseException) -> CheckpointError:
    reason = str(exc).split(". ")[0].strip() or type(exc).__name__
    return CheckpointError(
        f"{path}: truncated, corrupt or not a PyTorch checkpoint ({reason})",
        hint="check the file is complete (compare its size or sha256 with the original) and was written by "
        "torch.save or safetensors",
    )


def _unsafe_globals(path: Path) -> list[str]:
    """The code-carrying globals a pickle names (those beyond DATA_ONLY_GLOBALS); [] for a damaged stream."""
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # pickletools raises ValueError, RuntimeError, EOFError, ... on bytes that are not a pickle
        return []
    return [name for name in found if name not in {_qualname(g) for g in DATA_ONLY_GLOBALS}]


def _unsafe(path: Path, unsafe: list[str]) -> CheckpointError:
    shown = ", ".join(unsafe[:4]) + (f" and {len(unsafe) - 4} more" if len(unsafe) > 4 else "")
    module = any(name.startswith("torch.nn.modules") for name in unsafe) or any(
        name.split(".")[-1][:1].isupper() and ".models." in name for name in unsafe
    )
    what = "a whole pickled model (torch.save(model))" if module else "pickled Python objects"
    return CheckpointError(
        f"{path}: refusing to unpickle {what} - loading it would run code named in the file"
        + (f" ({shown})" if shown else ""),
        hint="re-save only the weights with torch.save(model.state_dict(), path); or, only if you trust where the "
        "file came from, pass --trust-checkpoint",
        details={"unsafe_globals": unsafe},
    )


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _read_trusted(path: Path) -> RawCheckpoint:
    """The one place a checkpoint is fully unpickled: the user passed --trust-checkpoint."""
    try:
        content = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # arbitrary code ran; any failure is the file's
        raise CheckpointError(
            f"{path}: unpickling failed even with --trust-checkpoint ({type(exc).__name__}: {exc})",
            hint="the classes it names must be importable: run from the training project's folder",
        ) from exc
    if isinstance(content, torch.nn.Module):
        return RawCheckpoint(path, "pickle (trusted)", content.state_dict(), trusted_module=content)
    return RawCheckpoint(path, "pickle (trusted)", content)


def tensor_entries(obj: Any) -> dict[str, torch.Tensor] | None:
    """The tensors of a state-dict-like mapping (tensors, plus at most the metadata keys), else None."""
    if not isinstance(obj, Mapping) or not obj:
        return None
    tensors = {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}
    others = set(obj) - set(tensors)
    if not tensors or not others <= set(METADATA_KEYS):
        return None
    return tensors


def select_state_dict(content: Any, state_key: str | None = None) -> Selection:
    """Find the weights: `state_key` (dotted for nesting) if given, else top level, else EMA, else the usual keys."""
    if state_key is not None:
        return _select_explicit(content, state_key)
    tensors = tensor_entries(content)
    if tensors is not None:
        return Selection(tensors, None, False)
    if not isinstance(content, Mapping):
        raise CheckpointError(
            f"checkpoint holds a {type(content).__name__}, not a state dict or a dict containing one",
            hint="save model.state_dict() (or a dict with it under 'state_dict')",
        )
    found = _search(content, prefix="")
    if found is None:
        keys = ", ".join(repr(k) for k in list(content)[:12])
        raise CheckpointError(
            f"no weights found under any usual key (top-level keys: {keys})",
            hint="pass --state-key KEY naming the entry that holds the state dict",
        )
    key, tensors = found
    ema = key.split(".")[-1] in EMA_KEYS
    if not ema:
        return Selection(tensors, key, ema)
    raw = next((k for k in STATE_KEYS if tensor_entries(content.get(k)) is not None), None)
    note = f"using the EMA weights under '{key}' (as timm does)" + (
        f"; the raw weights are under '{raw}': pass --state-key {raw} to use them" if raw else ""
    )
    return Selection(tensors, key, ema, (note,))


def _search(content: Mapping, prefix: str, depth: int = 0) -> tuple[str, dict[str, torch.Tensor]] | None:
    for key in EMA_KEYS + STATE_KEYS:
        if key not in content:
            continue
        value = content[key]
        tensors = tensor_entries(value)
        if tensors is not None:
            return prefix + key, tensors
        if isinstance(value, Mapping) and depth < 1:
            nested = _search(value, prefix + key + ".", depth + 1)
            if nested is not None:
                return nested
    return None


def _select_explicit(content: Any, state_key: str) -> Selection:
    node = content
    for part in [state_key] if isinstance(content, Mapping) and state_key in content else state_key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            available = ", ".join(repr(k) for k in list(node)[:12]) if isinstance(node, Mapping) else "none"
            raise UsageError(
                f"--state-key {state_key!r}: no entry {part!r} in the checkpoint (keys there: {available})",
                hint="run `modelship inspect CKPT` to see the container's keys",
            )
        node = node[part]
    tensors = tensor_entries(node)
    if tensors is None:
        raise UsageError(
            f"--state-key {state_key!r} holds a {type(node).__name__}, not a dict of tensors",
            hint="name the entry that maps parameter names to tensors",
        )
    return Selection(tensors, state_key, state_key.split(".")[-1] in EMA_KEYS, (f"weights from '{state_key}' (flag)",))


@dataclass(frozen=True)
class ContainerEntry:
    """One top-level entry of a checkpoint: its key, what kind of value it holds, and a one-line summary."""

    key: str
    kind: str
    summary: str


@dataclass(frozen=True)
class CheckpointFile:
    """The file as read: its format, its size and the top-level structure of what it holds."""

    format: str
    size_bytes: int
    container: tuple[ContainerEntry, ...]


def describe_file(path: Path, raw: RawCheckpoint) -> CheckpointFile:
    """The file's format and size, and one row per top-level entry (what `inspect` prints as the container)."""
    return CheckpointFile(raw.format, path.stat().st_size, describe_container(raw.content))


def describe_container(content: Any) -> tuple[ContainerEntry, ...]:
    """One row per top-level entry (what `inspect` prints as the container structure)."""
    if not isinstance(content, Mapping):
        return (ContainerEntry("", type(content).__name__, ""),)
    if tensor_entries(content) is not None:
        return (ContainerEntry("(top level)", "state dict", f"{len(content)} entries"),)
    return tuple(ContainerEntry(str(key), *_describe(value)) for key, value in content.items())


def _describe(value: Any) -> tuple[str, str]:
    """(kind, summary) of one entry's value."""
    tensors = tensor_entries(value)
    if tensors is not None:
        return "state dict", f"{len(tensors)} tensors"
    if isinstance(value, torch.Tensor):
        return "tensor", f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, Mapping):
        shown = ", ".join(str(k) for k in list(value)[:5]) + (", ..." if len(value) > 5 else "")
        return "dict", f"{len(value)} keys: {shown}"
    if isinstance(value, (list, tuple)):
        return type(value).__name__, f"{len(value)} items"
    text = repr(value)
    return type(value).__name__, text if len(text) <= 60 else text[:57] + "..."


def weight_stats(state_dict: dict[str, torch.Tensor]) -> WeightStats:
    """Counts and dtypes of the chosen tensors, the floating ones holding NaN or Inf, and a note when float16 or
    bfloat16 weights will be converted."""
    dtypes = dict(Counter(str(t.dtype).removeprefix("torch.") for t in state_dict.values()))
    nonfinite = tuple(
        key for key, t in state_dict.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())
    )
    low = sorted(d for d in dtypes if d in ("float16", "bfloat16"))
    notes = (f"{' and '.join(low)} weights are converted to float32",) if low else ()
    return WeightStats(len(state_dict), sum(t.numel() for t in state_dict.values()), dtypes, nonfinite, notes)
