"""Real inputs for INT8: `--calibrate DATA` read through the export's own preprocessing (the module parity, the
server and the clients use) and split, so the inputs that set the quantization ranges are never the ones the INT8
verdict is judged on.

- Image models: a folder of images, each through the manifest's preprocessing spec. Every `HOLD_OUT`-th image (in
  name order) is held back for the verdict, the rest calibrate. Calibration images of one size are batched BATCH at
  a time; the held-back ones of one size make one set, so the verdict's agreement figures are over all of them (a
  single flip in a set of 8 would read as 0.875); without a crop each image is a set of its own.
- Text models: a file of lines through the export's tokenizer, split the same way. Without `--calibrate` a text
  model is quantized dynamically and judged on the export's own sentences (export.text_inputs), which no
  calibration saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelship.contract.errors import PreprocessError, UsageError
from modelship.contract.iospec import IOSpec
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TokenizerSource
from modelship.export.precision.int8.options import Int8Options
from modelship.export.spec import ExportSpec

HOLD_OUT = 5  # every 5th input is held back for the verdict: 20%
MIN_IMAGES = 10  # below this, neither half means anything (2 judged images)
ADVISED_IMAGES = 200  # what the refusal asks for: a few hundred, like production's
BATCH = 8  # inputs per calibration / verdict set
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff")


@dataclass(frozen=True)
class CalibrationSplit:
    """Calibration sets (ranges), held-back sets (the verdict) and their labels; `source` and the counts are
    recorded in the manifest."""

    calibration: list[Tensors]
    judged: list[Tensors]
    labels: list[str]
    source: str
    calibration_count: int
    judged_count: int

    def describe(self) -> str:
        return f"{self.source}: {self.calibration_count} to calibrate, {self.judged_count} held back for the verdict"


def check_calibration(spec: ExportSpec, preprocess: PreprocessSpec | None, tokenizer: TokenizerSource | None) -> None:
    """Refuse, before anything is exported, INT8 inputs that will not do: an image model without --calibrate (or
    without a preprocessing spec to run the images through, or with too few), a text model's --calibrate that is
    not a file."""
    calibrate = spec.options_for(Int8Options).calibrate
    if tokenizer is not None:
        if calibrate is not None and not calibrate.is_file():
            raise UsageError(f"--calibrate {calibrate}: not a file", hint="a text model calibrates on a file of lines")
        return
    if calibrate is None:
        raise UsageError(
            "--int8 needs calibration images for an image model: pass --calibrate FOLDER",
            hint=f"a folder of a few hundred images like production's (at least {MIN_IMAGES}; 1 in {HOLD_OUT} is "
            "held back to judge the INT8 model); a text model quantizes without any",
        )
    image_files(calibrate)
    _refuse_without_spec(preprocess)


def _refuse_without_spec(preprocess: PreprocessSpec | None) -> None:
    if preprocess is None:
        raise UsageError(
            "--calibrate: this export has no preprocessing spec to run the images through",
            hint="give it with --preprocess, e.g. --preprocess resize=256,crop=224 (ImageNet's mean and std unless "
            "mean=/std= say otherwise), or in a <ckpt>.json sidecar's 'preprocess'",
        )


def image_split(folder: Path, spec: PreprocessSpec | None, io: IOSpec) -> CalibrationSplit:
    """The images under `folder` through `spec`, split; a UsageError naming what to give when they will not do."""
    _refuse_without_spec(spec)
    assert spec is not None
    paths = image_files(folder)
    from modelship.preprocess import preprocess_images

    name = io.inputs[0].name
    arrays = []
    for path in paths:
        try:
            arrays.append(preprocess_images([path], spec)[0])
        except PreprocessError as exc:
            raise UsageError(f"--calibrate {folder}: {exc.message}", hint="remove or replace that file") from None
    judged = [a for i, a in enumerate(arrays) if i % HOLD_OUT == HOLD_OUT - 1]
    calibration = [a for i, a in enumerate(arrays) if i % HOLD_OUT != HOLD_OUT - 1]
    dtype = np.dtype(io.inputs[0].dtype)
    judged_sets = [{name: batch.astype(dtype)} for batch in _batches(judged, io, len(judged))]
    return CalibrationSplit(
        [{name: batch.astype(dtype)} for batch in _batches(calibration, io, BATCH)],
        judged_sets,
        [f"held-back images {i + 1} ({len(s[name])})" for i, s in enumerate(judged_sets)],
        f"{folder} ({len(paths)} images)",
        len(calibration),
        len(judged),
    )


def image_files(folder: Path) -> list[Path]:
    """The image files in `folder` (and below), in name order; a UsageError unless there are MIN_IMAGES."""
    if not folder.is_dir():
        raise UsageError(
            f"--calibrate {folder}: not a folder",
            hint=f"give a folder of images like the ones the model will serve (a few hundred; at least {MIN_IMAGES})",
        )
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if len(paths) < MIN_IMAGES:
        raise UsageError(
            f"--calibrate {folder}: {len(paths)} image file(s); INT8 needs at least {MIN_IMAGES}",
            hint=f"give a few hundred images like production's (about {ADVISED_IMAGES}); "
            f"1 in {HOLD_OUT} is held back to judge the INT8 model",
        )
    return paths


def _batches(arrays: Sequence[np.ndarray], io: IOSpec, size: int) -> list[np.ndarray]:
    """Same-size arrays stacked `size` at a time (one row at a time for a single-row graph)."""
    size = 1 if io.max_rows == 1 or not io.batched else max(size, 1)
    groups: dict[tuple[int, ...], list[np.ndarray]] = {}
    for array in arrays:
        groups.setdefault(array.shape, []).append(array)
    return [np.stack(group[i : i + size]) for group in groups.values() for i in range(0, len(group), size)]


def text_split(path: Path, tokenizer: TokenizerSource) -> CalibrationSplit:
    """The non-empty lines of `path` through the export's tokenizer, split; a UsageError when there are too few."""
    from modelship.parity.text_sets import read_text_file
    from modelship.preprocess.tokenizer import TextTokenizer

    lines = [line for line in read_text_file(path) if line.strip()]
    if len(lines) < MIN_IMAGES:
        raise UsageError(
            f"--calibrate {path}: {len(lines)} text line(s); static INT8 needs at least {MIN_IMAGES}",
            hint="give a few hundred lines like production's, or leave --calibrate out for dynamic INT8",
        )
    encode = TextTokenizer(tokenizer.path, tokenizer.spec).encode
    judged = [t for i, t in enumerate(lines) if i % HOLD_OUT == HOLD_OUT - 1]
    calibration = [t for i, t in enumerate(lines) if i % HOLD_OUT != HOLD_OUT - 1]
    judged_sets = [encode(judged)]
    return CalibrationSplit(
        [encode(calibration[i : i + BATCH]) for i in range(0, len(calibration), BATCH)],
        judged_sets,
        [f"held-back texts {i + 1} ({len(s['input_ids'])})" for i, s in enumerate(judged_sets)],
        f"{path} ({len(lines)} lines)",
        len(calibration),
        len(judged),
    )
