"""What a Triton server says about a model: its tensors, config parameters (what modelship publishes beside the
artifact) and state in the repository index, and the check of a request against them before it is sent."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tritonclient.utils import triton_to_np_dtype

from modelship.contract.errors import ClientError, PreprocessError
from modelship.contract.iospec import ServedNames
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import DEFAULT_TASK
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.serve.triton_config import (
    PARAM_EXPORT,
    PARAM_IO,
    PARAM_LABELS,
    PARAM_PREPROCESS,
    PARAM_TASK,
    ExportRecord,
)


@dataclass(frozen=True)
class ModelState:
    """One entry of the repository index: a model (version) and its state (READY, UNAVAILABLE, ...) with the
    reason Triton gives for a model that did not load."""

    name: str
    version: str = ""
    state: str = ""
    reason: str = ""

    @property
    def ready(self) -> bool:
        return self.state == "READY"


@dataclass(frozen=True)
class TensorInfo:
    """One input or output as the server declares it; `shape` includes the batch dim (-1) for batched models."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(triton_to_np_dtype(self.datatype))


@dataclass(frozen=True)
class ModelInfo:
    """A served model's metadata and config, including what modelship publishes in config `parameters`."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    max_batch_size: int
    parameters: dict[str, str] = field(default_factory=dict)
    steps: tuple[str, ...] = ()  # an ensemble's models, in its config's order

    def _json(self, key: str) -> Any:
        return json.loads(self.parameters[key]) if key in self.parameters else None

    @property
    def preprocess(self) -> PreprocessSpec | None:
        """The preprocessing spec published with the model, checked (ClientError when it is not one)."""
        data = self._json(PARAM_PREPROCESS)
        if data is None:
            return None
        try:
            return PreprocessSpec.from_dict(data)
        except PreprocessError as exc:
            raise ClientError(
                f"model {self.name!r} publishes an invalid preprocessing spec: {exc.message}",
                hint="republish it with `modelship publish`",
            ) from None

    @property
    def labels(self) -> list[str] | None:
        return self._json(PARAM_LABELS)

    @property
    def export_info(self) -> ExportRecord | None:
        """Where the model came from, as modelship published it (None for models not published by modelship)."""
        data = self._json(PARAM_EXPORT)
        return ExportRecord.from_dict(data) if isinstance(data, dict) else None

    @property
    def task(self) -> str:
        """The model's task: its export's, else a pipeline's (PARAM_TASK), else classification (models published
        before tasks were recorded, or not by modelship)."""
        info = self.export_info
        return info.task if info else self.parameters.get(PARAM_TASK) or DEFAULT_TASK

    @property
    def io_names(self) -> ServedNames:
        """Served names mapped to the export's (publish wrote them); identity for models not from modelship."""
        data = self._json(PARAM_IO)
        if not data:
            return ServedNames.identity([t.name for t in self.inputs], [t.name for t in self.outputs])
        try:
            return ServedNames.from_dict(data)
        except ValueError as exc:
            raise ClientError(f"model {self.name!r}: config parameter {PARAM_IO!r} is not a name map ({exc})") from None

    @classmethod
    def from_server(cls, name: str, metadata: JsonObject, config: JsonObject) -> ModelInfo:
        """From the model's metadata and config as Triton answers them in JSON."""
        return cls(
            name=name,
            versions=tuple(metadata.get("versions", [])),
            platform=metadata.get("platform", ""),
            inputs=tuple(_tensor_info(t) for t in metadata.get("inputs", [])),
            outputs=tuple(_tensor_info(t) for t in metadata.get("outputs", [])),
            max_batch_size=int(config.get("max_batch_size", 0)),
            parameters={k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()},
            steps=tuple(step["model_name"] for step in config.get("ensemble_scheduling", {}).get("step", [])),
        )

    def input(self, name: str) -> TensorInfo:
        return next(t for t in self.inputs if t.name == name)

    def check_inputs(self, inputs: Tensors) -> None:
        """ClientError unless `inputs` match the model's declared names, dtypes and shapes (and batch limit)."""
        expected = {t.name for t in self.inputs}
        problems = []
        if expected - set(inputs):
            problems.append(f"missing inputs {sorted(expected - set(inputs))}")
        if set(inputs) - expected:
            problems.append(f"unexpected inputs {sorted(set(inputs) - expected)}")
        if problems:
            raise ClientError(
                f"model {self.name!r}: {'; '.join(problems)}",
                hint=f"inputs: {', '.join(f'{t.name} {t.datatype} {list(t.shape)}' for t in self.inputs)}",
            )
        batches = set()
        for spec in self.inputs:
            array = inputs[spec.name]
            if not isinstance(array, np.ndarray):
                raise ClientError(f"model {self.name!r}: input {spec.name!r} is a {type(array).__name__}, not an array")
            if array.dtype != spec.dtype:
                raise ClientError(
                    f"model {self.name!r}: input {spec.name!r} is {array.dtype}, the model takes {spec.datatype}",
                    hint=f"cast it: array.astype(np.{spec.dtype})",
                )
            if not _fits(array.shape, spec.shape):
                raise ClientError(
                    f"model {self.name!r}: input {spec.name!r} has shape {list(array.shape)}, "
                    f"the model takes {list(spec.shape)} (-1: any size)",
                    hint="the first dim is the batch" if self.max_batch_size else None,
                )
            if self.max_batch_size:
                batches.add(array.shape[0])
        if len(batches) > 1:
            raise ClientError(f"model {self.name!r}: inputs disagree on the batch size: {sorted(batches)}")
        if batches and max(batches) > self.max_batch_size:
            raise ClientError(
                f"model {self.name!r}: batch of {max(batches)} is over its max_batch_size {self.max_batch_size}",
                hint="split the batch (modelship infer --batch N)",
            )


def _fits(shape: tuple[int, ...], declared: tuple[int, ...]) -> bool:
    """`shape` matches `declared` (where -1 is any size)."""
    return len(shape) == len(declared) and all(d in (-1, n) for d, n in zip(declared, shape, strict=True))


def _tensor_info(meta: JsonObject) -> TensorInfo:
    return TensorInfo(meta["name"], meta["datatype"], tuple(int(d) for d in meta.get("shape", [])))


def instance_count(config: JsonObject) -> int:
    """The instances (backend stubs) a served config (Triton's JSON) asks for: every group's count, 1 without any."""
    return sum(int(group.get("count", 1)) for group in config.get("instance_group", [])) or 1
