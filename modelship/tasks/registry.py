"""The task registry: what kind of model an export is, and everything that follows from it.

A task decides how each output is judged (the compare kind of each output, looked up in
`modelship.parity.compare`), which preprocessing feeds it (`preprocessing`: an image spec today, "none" for
tensors as they are), what a served model publishes beside its artifact (`labels`: labels.txt and Triton's
classification extension on its first output) and how `modelship infer` shows an answer (`answer`). An export
records its task in manifest.json; `export-model --task` chooses it, else the checkpoint's metadata ("task"), else
the first registered task that claims the model's outputs, else `classification`.

Adding a task is one module that calls `register_task` (see `classification.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.manifest import DEFAULT_TASK
from modelship.contract.opsets import OnnxExporter
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.registry import Registry


class Preprocessing(StrEnum):
    """What turns a request into the model's inputs."""

    IMAGE = "image"  # a PreprocessSpec
    TEXT = "text"  # a tokenizer
    NONE = "none"  # nothing: the request is the tensors


@dataclass(frozen=True)
class Prediction:
    """One entry of an answer `modelship infer` shows: the class `index`, its `label`, the raw `score` and the
    `probability` the task derives from it."""

    index: int
    label: str
    score: float
    probability: float

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "label": self.label, "score": self.score, "probability": self.probability}


Answer = Callable[[np.ndarray, Sequence[str] | None, int], list[list[Prediction]]]


@dataclass(frozen=True)
class Task:
    """`output_kind(spec)`: the compare kind of one output; `claims(io)`: whether a model with this I/O is of this
    task when nobody said; `answer(scores, labels, k)`: per row, what `modelship infer` shows (None: the task has
    no answer to show yet); `dynamic`: the image axes its models take at any size unless --dynamic says
    otherwise; `pipeline_mask`: its served `_pipeline` ends with the class mask of its first output at the photo's
    own size (a `_postprocess` step); `pipeline_formats`: the formats its `_pipeline` serves by default, the first
    published of them (at the precision that serves first: contract.precisions);
    `pipeline_same_size`: its answers (boxes) are in the input's pixels: the pipeline must not crop, and puts them
    back on the photo after a resize (a `_postprocess` step);
    `labels`: its models have class labels (published as labels.txt, shown by `modelship infer`); `label_output`:
    its first output holds class scores, so Triton's classification extension labels them (not boxes or masks);
    `onnx_exporter`: the ONNX exporter its models need (unless --exporter says
    otherwise) and `onnx_why`, the reason; `onnx_single_row`: its ONNX graphs take one row (the exporter unrolls the
    model's per-image loop), judged row by row."""

    name: str
    description: str
    output_kind: Callable[[TensorSpec], str]
    claims: Callable[[IOSpec], bool] = lambda io: False
    preprocessing: Preprocessing = Preprocessing.IMAGE
    labels: bool = False
    label_output: bool = True
    answer: Answer | None = None
    dynamic: tuple[str, ...] = ()
    pipeline_mask: bool = False
    pipeline_formats: tuple[str, ...] = ("onnx",)
    pipeline_same_size: bool = False
    onnx_exporter: OnnxExporter | None = None
    onnx_why: str = ""
    onnx_single_row: bool = False

    def boxes_on_photo(self, spec: PreprocessSpec | None) -> bool:
        """Whether its answers are put back on the photo after the model: its boxes are in the input's pixels and
        `spec` resizes (the `_pipeline`'s box postprocess, and parity on image files, which judges the same)."""
        return bool(self.pipeline_same_size and spec is not None and spec.resize)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a task name is a plain name (letters, digits, - and _), got {self.name!r}")
        object.__setattr__(self, "preprocessing", Preprocessing(self.preprocessing))

    def output_kinds(self, io: IOSpec) -> dict[str, str]:
        """Output name -> compare kind, for every output of `io`."""
        return {spec.name: self.output_kind(spec) for spec in io.outputs}


TASKS: Registry[Task] = Registry("task")


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Add `task` under its name; another task under a name already taken is refused unless `replace`."""
    return TASKS.add(task.name, task, replace=replace)


def get_task(name: str) -> Task:
    """The registered task `name`, or a UsageError naming the tasks there are."""
    return TASKS.find(name)


def choose_task(io: IOSpec, requested: str | None = None) -> Task:
    """`requested` when given (--task, or the checkpoint's metadata), else the first task registered after the
    default that claims `io`, else the default."""
    if requested:
        return get_task(requested)
    claiming = [task for name, task in TASKS.items() if name != DEFAULT_TASK and task.claims(io)]
    return claiming[0] if claiming else get_task(DEFAULT_TASK)
