"""Model families: where a model comes from (torchvision, timm, a Hugging Face folder, a user's factory), and what
only its library knows, in the spirit of torchvision's weights API where a builder, its transforms and its meta
travel together.

A family entry declares, for the canonical architecture names it owns:
- `opens`: a checkpoint it reads by its own files (a Hugging Face folder: config.json beside the weights), as a
  `Folder`: where the weights are, its architecture, and how its model is built and given them;
- `canonical`, `known`: its spelling of a name as given (`resnet50`, `timm/NAME`, `pkg.module:Factory`), and every
  name it builds (close matches for a typo);
- `build`: the factory that builds a name from keyword arguments, randomly initialised, nothing downloaded;
- `candidates`, `variants`, `default_classes`, `preference`: which checkpoints it claims and how sure: the names whose
  weights could be a checkpoint's keys (the fingerprint builds each once), a name's own builds (a segmenter with its
  auxiliary head), the class count a name builds by default, and which family wins when weights fit two;
- `training_record`: the architecture a checkpoint's training script saved beside the weights (timm's train.py
  `args`), read when nothing names one;
- `adapt`: a built model of its library behind modelship's tensor interface for its task (a detector's one-tensor
  interface, a segmenter without its training-only auxiliary head), with notes for the load report; every family
  adapts every loaded model (a user's factory may return a torchvision detector), leaving others as they are;
- `input_size`: the image size its models take, when the model or its config says;
- `serving_spec`: the preprocessing its own config implies (stored in the manifest), when the checkpoint has none;
- `reference_transform`: the library's own per-image transform, which `parity --images` runs eager PyTorch through
  and compares modelship's preprocessing against;
- `labels`: the class names its reference weights know;
- `version`: its library's version, part of the key of the fingerprint's cached signatures;
- `scripts`: whether its models go through `torch.jit.script` (a plain export-model writes TorchScript).

Families are asked by preference, then in the order they registered; the first that owns a name answers, and a
name none owns is the fallback family's (a user's factory, `package.module:Factory`). A new family is one module calling
`register_family(ModelFamily(...))`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.registry import Registry

if TYPE_CHECKING:  # the registry stays light: these import torch
    from torch import Tensor

    from modelship.checkpoint.metadata import CheckpointMetadata
    from modelship.contract.tokenizer import TokenizerSource

StateDict = dict[str, "Tensor"]  # parameter name -> tensor
AUX_VARIANT = "+aux"  # a candidate name's suffix: the model built with its auxiliary head (aux_loss=True)


@dataclass(frozen=True)
class ReferenceTransform:
    """A library's per-image torch transform (PIL RGB image -> tensor) and where it came from."""

    transform: Callable[[Any], Any]
    source: str


def _nothing(*_: Any) -> None:
    return None


def _no_names(*_: Any) -> list[str]:
    return []


def _itself(arch: str) -> list[str]:
    return [arch]


@dataclass(frozen=True)
class Adapted:
    """A built model behind modelship's tensor interface, and what was changed to put it there."""

    model: Any
    notes: tuple[str, ...] = ()


def _as_is(model: Any, keep_aux: bool) -> Adapted:
    return Adapted(model)


# `match(state_dict, model, renames)`: the loader renames the checkpoint's keys (`renames`: old -> new, the family's
# own, listed in the load report with the key map's), checks them strictly against the model's and copies them in
Match = Callable[[StateDict, Any, dict[str, str]], None]


@dataclass(frozen=True)
class FolderModel:
    """A model built from a checkpoint folder's own files, its weights in, behind the tensor interface; what its
    files say (task, labels, io) and the tokenizer that feeds it, if any."""

    model: Any
    metadata: CheckpointMetadata
    tokenizer: TokenizerSource | None = None


@dataclass(frozen=True)
class Folder:
    """A checkpoint a family reads by its own files: the weights file, the architecture's canonical name, where it
    came from (`source`, `detail` for the load report) and `build(state_dict, match, notes) -> FolderModel`."""

    weights: Path
    arch: str
    source: str
    detail: str
    build: Callable[[StateDict, Match, list[str]], FolderModel]


@dataclass(frozen=True)
class TrainingRecord:
    """What a training script saved beside the weights says of the model: `fields` as a checkpoint's metadata holds
    them (`arch`, `arch_kwargs`; checked like a file's before use) and where they were read (`detail`)."""

    fields: JsonObject
    detail: str


@dataclass(frozen=True)
class ModelFamily:
    """What one source of models knows about its own (see the module doc). The callables take the built model (or
    None when only the name is known), the canonical architecture name and the checkpoint's path."""

    name: str
    owns: Callable[[str], bool]
    opens: Callable[[Path, str | None, list[str]], Folder | None] = _nothing
    canonical: Callable[[str], str | None] = _nothing
    known: Callable[[], Sequence[str]] = _no_names
    build: Callable[[str], Callable[..., Any]] | None = None  # None: its models are built from their folder
    candidates: Callable[[set[str]], list[str]] = _no_names
    variants: Callable[[str], list[str]] = _itself
    default_classes: Callable[[str], int | None] = _nothing
    preference: int = 0
    training_record: Callable[[Any], TrainingRecord | None] = _nothing  # from a checkpoint's loaded content
    registry: bool = False  # builds from the name alone: its default class count is known, weights can pick a name
    adapt: Callable[[Any, bool], Adapted] = _as_is
    input_size: Callable[[Any, str], tuple[int, int] | None] = _nothing
    serving_spec: Callable[[Any, str, Path], PreprocessSpec | None] = _nothing
    reference_transform: Callable[[Any, str, Path], ReferenceTransform | None] = _nothing
    labels: Callable[[str, int], list[str] | None] = _nothing
    version: Callable[[], str | None] = _nothing
    scripts: bool = True
    fallback: bool = False  # owns what no other family owns


FAMILIES: Registry[ModelFamily] = Registry("model family")


def register_family(family: ModelFamily, *, replace: bool = False) -> ModelFamily:
    """Add `family`; another family under a name already taken is refused unless `replace` (it keeps its place)."""
    return FAMILIES.add(family.name, family, replace=replace)


def unregister_family(name: str) -> None:
    FAMILIES.pop(name, None)


def families() -> list[ModelFamily]:
    """Every registered family, in the order they are asked (by preference, then as registered)."""
    return sorted(FAMILIES.values(), key=lambda family: family.preference)


def adapt_model(model: Any, *, keep_aux: bool = False) -> Adapted:
    """`model` through every family's `adapt`: behind modelship's tensor interface, whichever library built it."""
    notes: list[str] = []
    for family in families():
        adapted = family.adapt(model, keep_aux)
        model = adapted.model
        notes += adapted.notes
    return Adapted(model, tuple(notes))


def training_record(content: Any) -> TrainingRecord | None:
    """The first family's reading of the training record saved in a checkpoint's `content`, or None."""
    return next((r for family in families() if (r := family.training_record(content)) is not None), None)


def open_folder(checkpoint: Path, arch: str | None, notes: list[str]) -> Folder | None:
    """The first family's reading of `checkpoint` by its own files (`--arch`, when given, is `arch`), or None."""
    return next((f for family in families() if (f := family.opens(checkpoint, arch, notes)) is not None), None)


def family_of(arch: str) -> ModelFamily:
    """The family that owns the canonical architecture name `arch`."""
    for family in families():
        if not family.fallback and family.owns(arch):
            return family
    fallback = next((f for f in families() if f.fallback), None)
    if fallback is None:
        raise UsageError(f"no model family owns the architecture {arch!r}")
    return fallback
