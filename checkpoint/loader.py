"""`load_model`: checkpoint file -> eval-mode float32 CPU model, with a report of every decision and key change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from modelship.checkpoint.alignment import KeyAlignment, align_keys, head_classes, refuse_misfit
from modelship.checkpoint.arch import build_model
from modelship.checkpoint.families import Folder, adapt_model, open_folder, training_record
from modelship.checkpoint.keymap import KeyMap, apply_key_map, load_key_map, strip_all_wrappers
from modelship.checkpoint.load_report import Findings, LoadReport
from modelship.checkpoint.metadata import CheckpointMetadata, checkpoint_metadata, read_sidecar
from modelship.checkpoint.reading import (
    RawCheckpoint,
    WeightStats,
    check_file,
    describe_file,
    read_checkpoint,
    select_state_dict,
    weight_stats,
)
from modelship.checkpoint.resolve import ArchChoice, inferred_note, resolve_arch
from modelship.contract.errors import CheckpointError, ModelshipError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import sha256_file
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tokenizer import TokenizerSource


@dataclass
class LoadOptions:
    """How to load a checkpoint; built from the CLI by `load_flags` (modelship/cli/loader_options.py)."""

    checkpoint: Path
    arch: str | None = None  # torchvision name "resnet50", "timm/NAME", or "pkg.module:Factory"
    arch_kwargs: JsonObject | None = None
    key_map: Path | None = None  # JSON or TOML
    state_key: str | None = None
    allow_missing: tuple[str, ...] = ()  # fnmatch globs
    allow_unexpected: tuple[str, ...] = ()
    trust_checkpoint: bool = False
    keep_aux: bool = False  # keep a segmentation model's auxiliary head (its "aux" output); dropped by default
    expected_sha256: str | None = None  # refuse a file with another sha256 before reading anything from it

    def __post_init__(self) -> None:
        self.checkpoint = Path(self.checkpoint)
        self.key_map = Path(self.key_map) if self.key_map is not None else None
        if self.arch_kwargs is not None and not isinstance(self.arch_kwargs, dict):
            raise UsageError(f"--arch-kwargs must be a JSON object, got {type(self.arch_kwargs).__name__}")
        self.allow_missing = tuple(self.allow_missing)
        self.allow_unexpected = tuple(self.allow_unexpected)


@dataclass
class LoadedModel:
    model: torch.nn.Module  # eval mode, float32, CPU
    arch: str  # canonical: "resnet50", "timm/vit_tiny_patch16_224", "pkg.mod:Factory"
    arch_kwargs: JsonObject
    arch_source: str  # "flag" | "checkpoint" | "sidecar" | "fingerprint"
    checkpoint_sha256: str
    metadata: CheckpointMetadata  # io, preprocess, labels, task: from the checkpoint, its sidecar or its folder
    report: LoadReport
    tokenizer: TokenizerSource | None = None  # a text model's tokenizer (Hugging Face folders)

    @property
    def preprocess(self) -> PreprocessSpec | None:
        """The checkpoint's own preprocessing spec (its metadata's), checked."""
        return self.metadata.preprocess

    def serving_spec(self) -> PreprocessSpec | None:
        """The spec to serve with: the checkpoint's own, else the one its model family implies (timm's
        pretrained_cfg, torchvision's weights, a Hugging Face folder's image processor), else None."""
        from modelship.checkpoint.families import family_of

        return self.preprocess or family_of(self.arch).serving_spec(self.model, self.arch, Path(self.report.checkpoint))


def load_model(options: LoadOptions, *, progress: Callable[[int, int], None] | None = None) -> LoadedModel:
    """Load, resolve, match strictly and copy the weights. Every failure carries the partial report in `details`.

    `progress(done, total)` is called while fingerprint signatures are being built (cold cache only).
    """
    found = Findings(checkpoint=str(options.checkpoint))
    try:
        return _load(options, found, progress)
    except ModelshipError as exc:
        exc.details = {**found.report(error=str(exc)).to_dict(), **exc.details}
        raise


def _load(options: LoadOptions, found: Findings, progress: Callable[[int, int], None] | None) -> LoadedModel:
    folder = open_folder(options.checkpoint, options.arch, found.notes)  # a family's own files (a Hugging Face folder)
    path = folder.weights if folder else options.checkpoint
    key_map = load_key_map(options.key_map) if options.key_map else KeyMap()
    check_file(path)
    found.sha256 = sha256_file(path)
    if options.expected_sha256 and found.sha256 != options.expected_sha256:
        raise CheckpointError(
            f"{path}: checkpoint differs from the one exported (sha256 {found.sha256[:12]}, "
            f"manifest {options.expected_sha256[:12]})",
            hint="pass the original with --checkpoint, or use --against golden",
        )
    raw = read_checkpoint(path, trust=options.trust_checkpoint)
    found.file = describe_file(path, raw)
    found.selection = selection = select_state_dict(raw.content, options.state_key)
    found.notes += selection.notes
    found.weights = stats = weight_stats(selection.state_dict)
    found.notes += stats.notes
    _refuse_nonfinite(stats, path)
    if folder is not None:
        return _load_folder(folder, selection.state_dict, key_map, options, found)

    checkpoint_meta, sidecar_meta = checkpoint_metadata(raw), read_sidecar(path)
    found.arch = choice = _choose_arch(
        options, raw, checkpoint_meta, sidecar_meta, selection.state_dict, key_map, progress
    )
    found.notes += choice.notes

    use_pickled = raw.trusted_module is not None and not options.arch
    model = raw.trusted_module if use_pickled else build_model(choice.arch, choice.arch_kwargs)
    assert model is not None  # use_pickled: the checkpoint holds a trusted module
    found.keys = keys = _align(selection.state_dict, model, key_map, options)
    given = use_pickled or "num_classes" in choice.arch_kwargs  # the class count is the user's or the module's
    classes = None if keys.ok or given else head_classes(keys.comparison, choice)
    if classes is not None:  # only the head does not fit: rebuilt with the class count read off its weights
        heads = [m.key for m in keys.comparison.shape_mismatches]
        found.arch = choice = replace(choice, arch_kwargs={**choice.arch_kwargs, "num_classes": classes})
        model = build_model(choice.arch, choice.arch_kwargs)
        found.keys = keys = _align(selection.state_dict, model, key_map, options)
        if keys.ok:
            found.notes.append(inferred_note("num_classes", classes, "the head's weights", heads))
    refuse_misfit(keys, choice, path)
    _copy_weights(model, keys.tensors)
    adapted = adapt_model(model, keep_aux=options.keep_aux)  # behind the tensor interface of its task
    found.notes += adapted.notes
    metadata = CheckpointMetadata.parse({**sidecar_meta, **checkpoint_meta}, str(path), found.notes)
    return LoadedModel(
        adapted.model, choice.arch, choice.arch_kwargs, choice.source, found.sha256, metadata, found.report()
    )


def _load_folder(
    folder: Folder, state_dict: dict[str, torch.Tensor], key_map: KeyMap, options: LoadOptions, found: Findings
) -> LoadedModel:
    """A checkpoint its model family reads by its own files: built by the family, its weights matched here."""
    found.arch = arch = ArchChoice(folder.arch, {}, folder.source, folder.detail)

    def match(weights: dict[str, torch.Tensor], model: torch.nn.Module, renames: dict[str, str]) -> None:
        found.keys = keys = _align(weights, model, key_map, options)
        refuse_misfit(keys, arch, folder.weights)
        _copy_weights(model, keys.tensors)
        found.keys = keys.with_renames(renames)

    built = folder.build(state_dict, match, found.notes)
    return LoadedModel(
        built.model, folder.arch, {}, folder.source, found.sha256, built.metadata, found.report(), built.tokenizer
    )


def _refuse_nonfinite(stats: WeightStats, path: Path) -> None:
    if stats.nonfinite:
        shown = ", ".join(stats.nonfinite[:5]) + (
            f" and {len(stats.nonfinite) - 5} more" if len(stats.nonfinite) > 5 else ""
        )
        raise CheckpointError(
            f"{path}: NaN or Inf in {len(stats.nonfinite)} tensors: {shown}",
            hint="the training run diverged or the file is corrupt; use an earlier checkpoint",
            details={"nonfinite": list(stats.nonfinite)},
        )


def _choose_arch(
    options: LoadOptions,
    raw: RawCheckpoint,
    checkpoint_meta: JsonObject,
    sidecar_meta: JsonObject,
    state_dict: dict[str, torch.Tensor],
    key_map: KeyMap,
    progress: Callable[[int, int], None] | None,
) -> ArchChoice:
    if raw.trusted_module is not None and not options.arch:
        cls = type(raw.trusted_module)
        return ArchChoice(
            f"{cls.__module__}:{cls.__qualname__}", {}, "checkpoint", "the pickled module itself (--trust-checkpoint)"
        )
    stripped = [strip_all_wrappers(k) for k in state_dict]
    renames, _, _ = apply_key_map(stripped, key_map)
    shapes = {renames[s]: tuple(t.shape) for s, t in zip(stripped, state_dict.values(), strict=True) if s in renames}
    return resolve_arch(
        flag=options.arch,
        flag_kwargs=options.arch_kwargs,
        checkpoint_meta=checkpoint_meta,
        sidecar_meta=sidecar_meta,
        record=training_record(raw.content),
        shapes=shapes,
        checkpoint_name=str(options.checkpoint),
        progress=progress,
        trust=options.trust_checkpoint,
    )


def _align(
    state_dict: dict[str, torch.Tensor], model: torch.nn.Module, key_map: KeyMap, options: LoadOptions
) -> KeyAlignment:
    return align_keys(state_dict, model, key_map, options.allow_missing, options.allow_unexpected)


def _copy_weights(model: torch.nn.Module, aligned: dict[str, torch.Tensor]) -> None:
    """Copy into the model as float32 (fp16/bf16 checkpoints), leaving integer buffers as they are."""
    converted = {k: v.float() if v.is_floating_point() else v for k, v in aligned.items()}
    with torch.no_grad():
        model.load_state_dict(converted, strict=False)
    model.float().eval()
