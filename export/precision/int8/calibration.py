"""Real inputs for INT8: `--calibrate DATA` read through the export's own preprocessing (the module parity, the
server and the clients use) and split, so the inputs that set the quantization ranges are never the ones the INT8
verdict is judged on.

- Image models: a folder of images, each through the manifest's preprocessing spec. Every `HOLD_OUT`-th image (in
  name order) is held back for the verdict, the rest calibrate; with `--holdout DIR` every image calibrates and
  the verdict is judged on DIR's. Calibration images of one size are batched BATCH at
  a time; the held-back ones of one size make one set, so the verdict's agreement figures are over all of them (a
  single flip in a set of 8 would read as 0.875); without a crop each image is a set of its own.
- Text models: a file of lines through the export's tokenizer, split the same way (or judged on `--holdout`'s
  lines). Without `--calibrate` a text
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
    holdout: bool = False  # judged on --holdout's inputs, not 1 in HOLD_OUT of the calibration data

    def describe(self) -> str:
        held = "from --holdout" if self.holdout else "held back"
        return f"{self.source}: {self.calibration_count} to calibrate, {self.judged_count} {held} for the verdict"


def check_calibration(spec: ExportSpec, preprocess: PreprocessSpec | None, tokenizer: TokenizerSource | None) -> None:
    """Refuse, before anything is exported, INT8 inputs that will not do: an image model without --calibrate (or
    without a preprocessing spec to run the images through, or with too few), a text model's --calibrate that is
    not a file."""
    options = spec.options_for(Int8Options)
    calibrate, holdout = options.calibrate, options.holdout
    if holdout is not None and calibrate is None:
        raise UsageError("--holdout needs --calibrate", hint="give the inputs to calibrate on with --calibrate DATA")
    if tokenizer is not None:
        for flag, path in (("--calibrate", calibrate), ("--holdout", holdout)):
            if path is not None and not path.is_file():
                raise UsageError(f"{flag} {path}: not a file", hint="a text model calibrates on a file of lines")
        return
    if calibrate is None:
        raise UsageError(
            "--int8 needs calibration images for an image model: pass --calibrate FOLDER",
            hint=f"a folder of a few hundred images like production's (at least {MIN_IMAGES}; 1 in {HOLD_OUT} is "
            "held back to judge the INT8 model); a text model quantizes without any",
        )
    image_files(calibrate)
    if holdout is not None:
        image_files(holdout, "--holdout")
    _refuse_without_spec(preprocess)


def _refuse_without_spec(preprocess: PreprocessSpec | None) -> None:
    if preprocess is None:
        raise UsageError(
            "--calibrate: this export has no preprocessing spec to run the images through",
            hint="give it with --preprocess, e.g. --preprocess resize=256,crop=224 (ImageNet's mean and std unless "
            "mean=/std= say otherwise), or in a <ckpt>.json sidecar's 'preprocess'",
        )


def image_split(folder: Path, spec: PreprocessSpec | None, io: IOSpec, holdout: Path | None = None) -> CalibrationSplit:
    """The images under `folder` through `spec`, split (or all calibrating, judged on `holdout`'s); a UsageError
    naming what to give when they will not do."""
    _refuse_without_spec(spec)
    assert spec is not None
    paths = image_files(folder)
    arrays = _preprocessed(folder, paths, spec, "--calibrate")
    if holdout is None:
        judged = [a for i, a in enumerate(arrays) if i % HOLD_OUT == HOLD_OUT - 1]
        calibration = [a for i, a in enumerate(arrays) if i % HOLD_OUT != HOLD_OUT - 1]
        source = f"{folder} ({len(paths)} images)"
    else:
        judged, calibration = _preprocessed(holdout, image_files(holdout, "--holdout"), spec, "--holdout"), arrays
        source = f"{folder} ({len(paths)} images), judged on {holdout} ({len(judged)} images)"
    name, dtype = io.inputs[0].name, np.dtype(io.inputs[0].dtype)
    judged_sets = [{name: batch.astype(dtype)} for batch in _batches(judged, io, len(judged))]
    return CalibrationSplit(
        [{name: batch.astype(dtype)} for batch in _batches(calibration, io, BATCH)],
        judged_sets,
        [f"held-back images {i + 1} ({len(s[name])})" for i, s in enumerate(judged_sets)],
        source,
        len(calibration),
        len(judged),
        holdout is not None,
    )


def _preprocessed(folder: Path, paths: Sequence[Path], spec: PreprocessSpec, flag: str) -> list[np.ndarray]:
    from modelship.preprocess import preprocess_images

    arrays = []
    for path in paths:
        try:
            arrays.append(preprocess_images([path], spec)[0])
        except PreprocessError as exc:
            raise UsageError(f"{flag} {folder}: {exc.message}", hint="remove or replace that file") from None
    return arrays


def image_files(folder: Path, flag: str = "--calibrate") -> list[Path]:
    """The image files in `folder` (and below), in name order; a UsageError naming `flag` unless there are
    MIN_IMAGES."""
    if not folder.is_dir():
        raise UsageError(
            f"{flag} {folder}: not a folder",
            hint=f"give a folder of images like the ones the model will serve (a few hundred; at least {MIN_IMAGES})",
        )
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if len(paths) < MIN_IMAGES:
        raise UsageError(
            f"{flag} {folder}: {len(paths)} image file(s); INT8 needs at least {MIN_IMAGES}",
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


def text_split(path: Path, tokenizer: TokenizerSource, holdout: Path | None = None) -> CalibrationSplit:
    """The non-empty lines of `path` through the export's tokenizer, split (or all calibrating, judged on
    `holdout`'s); a UsageError when there are too few."""
    from modelship.preprocess.tokenizer import TextTokenizer

    lines = _lines(path, "--calibrate")
    encode = TextTokenizer(tokenizer.path, tokenizer.spec).encode
    if holdout is None:
        judged = [t for i, t in enumerate(lines) if i % HOLD_OUT == HOLD_OUT - 1]
        calibration = [t for i, t in enumerate(lines) if i % HOLD_OUT != HOLD_OUT - 1]
        source = f"{path} ({len(lines)} lines)"
    else:
        judged, calibration = _lines(holdout, "--holdout"), lines
        source = f"{path} ({len(lines)} lines), judged on {holdout} ({len(judged)} lines)"
    judged_sets = [encode(judged)]
    return CalibrationSplit(
        [encode(calibration[i : i + BATCH]) for i in range(0, len(calibration), BATCH)],
        judged_sets,
        [f"held-back texts {i + 1} ({len(s['input_ids'])})" for i, s in enumerate(judged_sets)],
        source,
        len(calibration),
        len(judged),
        holdout is not None,
    )


def _lines(path: Path, flag: str) -> list[str]:
    from modelship.parity.text_sets import read_text_file

    lines = [line for line in read_text_file(path) if line.strip()]
    if len(lines) < MIN_IMAGES:
        raise UsageError(
            f"{flag} {path}: {len(lines)} text line(s); static INT8 needs at least {MIN_IMAGES}",
            hint="give a few hundred lines like production's, or leave --calibrate out for dynamic INT8",
        )
    return lines
