"""Golden data: seeded inputs and the reference outputs for them, in one .npz beside an export.

`modelship parity --against golden` checks artifacts against it without the checkpoint or PyTorch. Keys are
`inputs/<set>/<name>` and `outputs/<set>/<name>`; arrays keep their dtypes.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from modelship.contract.errors import ParityError
from modelship.contract.tensors import Tensors

FORMAT_KEY = "modelship_golden_version"
FORMAT_VERSION = 1


def save_golden(path: Path, inputs: list[Tensors], outputs: list[Tensors]) -> None:
    """Write input sets and their reference outputs (same length, same order) to one .npz file."""
    if len(inputs) != len(outputs):
        raise ValueError(f"golden data needs one output set per input set, got {len(inputs)} and {len(outputs)}")
    arrays = {FORMAT_KEY: np.array(FORMAT_VERSION)}
    for kind, sets in (("inputs", inputs), ("outputs", outputs)):
        for i, tensors in enumerate(sets):
            arrays.update({f"{kind}/{i}/{name}": np.asarray(value) for name, value in tensors.items()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:  # a file object keeps numpy from appending ".npz" to other suffixes
        np.savez(handle, **arrays)


def load_golden(path: Path) -> tuple[list[Tensors], list[Tensors]]:
    """The (inputs, outputs) lists written by `save_golden`."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if FORMAT_KEY not in data.files:
                raise ParityError(f"{path}: not a modelship golden file (no {FORMAT_KEY})")
            sets: dict[str, dict[int, Tensors]] = {"inputs": {}, "outputs": {}}
            for key in data.files:
                if key == FORMAT_KEY:
                    continue
                kind, index, name = key.split("/", 2)
                sets[kind].setdefault(int(index), {})[name] = data[key]
    except FileNotFoundError:
        raise ParityError(f"{path}: golden file not found", hint="re-run export-model to write it") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise ParityError(f"{path}: unreadable golden file ({exc})", hint="re-run export-model to write it") from None
    count = len(sets["inputs"])
    if sorted(sets["inputs"]) != list(range(count)) or sorted(sets["outputs"]) != list(range(count)):
        raise ParityError(f"{path}: golden file has unmatched input/output sets")
    return [sets["inputs"][i] for i in range(count)], [sets["outputs"][i] for i in range(count)]
