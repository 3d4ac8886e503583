"""Activation ranges for static INT8, calibrated once per kind and reused by every try.

ONNX Runtime's `quantize_static` calibrates on every call; a search that tries a dozen exclusions would calibrate a
dozen times. Here each kind of ranges (the method, symmetric or not) is calibrated once, for the largest op set
tried, by ONNX Runtime's own calibrators, into its calibration cache file (`save_tensors_data`), and every quantization
of that kind reads it (`calibration_cache_path`).

Memory stays bounded: a histogram calibrator (percentile, entropy) is fed the sets in chunks of at most
CHUNK_VALUES input values per `collect_data` call, so it holds one chunk's activations at a time and merges them
into its histograms (given every set at once, ONNX Runtime's calibrators keep every activation of every input: 7.8
GB for 120 photos of 224x224). Chunks, not single sets: each call after the first re-bins into the histogram's
growing edges, and 12 calls of 8 photos took 86 s where one took 7. MinMax keeps only each set's reduced minimum
and maximum, so it is fed everything at once (its per-set ranges are then averaged).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelship.contract.tensors import Tensors
from modelship.export.precision.int8.recipe import Activations, Calibration, Int8Recipe

PERCENTILE = 99.999
CHUNK_VALUES = 24 * 3 * 224 * 224  # input values per histogram calibration call: 24 ImageNet-sized photos


@dataclass(frozen=True)
class RangeKind:
    """What a set of ranges depends on besides the graph's tensors: the method, and whether the ranges are
    symmetric (signed activations)."""

    method: Calibration
    symmetric: bool

    @classmethod
    def of(cls, recipe: Int8Recipe) -> RangeKind:
        return cls(recipe.method, recipe.activations is Activations.INT8)

    @property
    def histogram(self) -> bool:
        return self.method is not Calibration.MINMAX


def ort_method(method: Calibration) -> Any:
    """ONNX Runtime's CalibrationMethod for ours."""
    from onnxruntime.quantization import CalibrationMethod

    return {
        Calibration.MINMAX: CalibrationMethod.MinMax,
        Calibration.ENTROPY: CalibrationMethod.Entropy,
        Calibration.PERCENTILE: CalibrationMethod.Percentile,
    }[method]


class _Reader:
    """ONNX Runtime's CalibrationDataReader protocol over our input sets."""

    def __init__(self, sets: Sequence[Tensors]) -> None:
        self._sets = iter(list(sets))

    def get_next(self) -> Tensors | None:
        return next(self._sets, None)


def calibrate(
    model: Path, ops: Sequence[str], kind: RangeKind, sets: Sequence[Tensors], out: Path, chunk: int = CHUNK_VALUES
) -> Path:
    """Calibrate the tensors of the `ops` nodes of the graph at `model` on `sets` by `kind` into ONNX Runtime's
    calibration cache file `out` (a histogram `chunk` input values at a time)."""
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    options = {"symmetric": kind.symmetric, "moving_average": not kind.histogram, "percentile": PERCENTILE}
    with tempfile.TemporaryDirectory(prefix="modelship-calibrate-") as scratch:
        calibrator = create_calibrator(
            model,
            list(ops),
            augmented_model_path=str(Path(scratch) / "augmented.onnx"),
            calibrate_method=ort_method(kind.method),
            extra_options=options,
        )
        try:
            for part in chunks(sets, chunk) if kind.histogram else [list(sets)]:
                calibrator.collect_data(_Reader(part))
            ranges = calibrator.compute_data()
        finally:
            del calibrator
    save_tensors_data(ranges, out)
    return out


def chunks(sets: Sequence[Tensors], values: int) -> list[list[Tensors]]:
    """The sets in order, grouped while a group's input values stay within `values` (a set alone when larger) and
    its sets are of one shape: a histogram calibrator stacks what one call gives it, and sets of other shapes (a
    last batch of 4 after batches of 8, images without a crop) would not stack."""
    groups: list[list[Tensors]] = []
    size = 0
    for inputs in sets:
        count = sum(array.size for array in inputs.values())
        if not groups or size + count > values or _shapes(inputs) != _shapes(groups[-1][0]):
            groups.append([])
            size = 0
        groups[-1].append(inputs)
        size += count
    return groups


def _shapes(inputs: Tensors) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((name, array.shape) for name, array in inputs.items())


class Ranges:
    """The calibration cache files of one export's INT8 search, made on first use in `folder`: the tensors of every
    node of `ops` (the largest op set a recipe quantizes: a recipe quantizing fewer reads its own from them), one
    file per RangeKind."""

    def __init__(
        self, model: Path, sets: Sequence[Tensors], folder: Path, ops: Sequence[str] = (), chunk: int = CHUNK_VALUES
    ) -> None:
        self.model, self.sets, self.folder, self.ops, self.chunk = model, list(sets), folder, tuple(ops), chunk
        self._files: dict[RangeKind, Path] = {}

    def __bool__(self) -> bool:
        return bool(self.sets)

    def has(self, recipe: Int8Recipe) -> bool:
        """Whether `recipe`'s ranges are calibrated already."""
        return RangeKind.of(recipe) in self._files

    def for_recipe(self, recipe: Int8Recipe) -> Path:
        kind = RangeKind.of(recipe)
        if kind not in self._files:
            out = self.folder / f"int8-ranges-{len(self._files)}.json"
            self._files[kind] = calibrate(self.model, self.ops, kind, self.sets, out, self.chunk)
        return self._files[kind]

    def clean(self) -> None:
        for path in self._files.values():
            path.unlink(missing_ok=True)
        self._files.clear()
