"""`load_model`: checkpoint file -> eval-mode float32 CPU model, with a report of every decision and key change."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from modelship.checkpoint.arch import build_model, is_registry_arch
from modelship.checkpoint.families import Folder, adapt_model, open_folder, training_record
from modelship.checkpoint.fingerprint import default_num_classes
from modelship.checkpoint.keymap import (
    KeyMap,
    apply_key_map,
    load_key_map,
    strip_all_wrappers,
    strip_wrappers,
    suggest_renames,
)
from modelship.checkpoint.load_report import LoadReport
from modelship.checkpoint.matching import compare_keys, describe_problems, group_keys
from modelship.checkpoint.metadata import CheckpointMetadata, checkpoint_metadata, read_sidecar
from modelship.checkpoint.reading import (
    RawCheckpoint,
    check_file,
    describe_container,
    read_checkpoint,
    select_state_dict,
)
from modelship.checkpoint.resolve import ArchChoice, inferred_note, resolve_arch
from modelship.contract.errors import CheckpointError, KeyMappingError, ModelshipError, UsageError
from modelship.contract.jsonfile import JsonObject
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
    report = LoadReport(checkpoint=str(options.checkpoint))
    try:
        return _load(options, report, progress)
    except ModelshipError as exc:
        report.ok = False
        report.error = str(exc)
        exc.details = {**report.to_dict(), **exc.details}
        raise


def _load(options: LoadOptions, report: LoadReport, progress: Callable[[int, int], None] | None) -> LoadedModel:
    folder = open_folder(options.checkpoint, options.arch, report.notes)  # a family's own files (a Hugging Face folder)
    path = folder.weights if folder else options.checkpoint
    key_map = load_key_map(options.key_map) if options.key_map else KeyMap()
    check_file(path)
    report.sha256 = sha256_file(path)
    if options.expected_sha256 and report.sha256 != options.expected_sha256:
        raise CheckpointError(
            f"{path}: checkpoint differs from the one exported (sha256 {report.sha256[:12]}, "
            f"manifest {options.expected_sha256[:12]})",
            hint="pass the original with --checkpoint, or use --against golden",
        )
    raw = read_checkpoint(path, trust=options.trust_checkpoint)
    report.format = raw.format
    report.size_bytes = path.stat().st_size
    report.container = describe_container(raw.content)
    selection = select_state_dict(raw.content, options.state_key)
    state_dict = selection.state_dict
    report.state_key, report.ema = selection.state_key, selection.ema
    report.notes += selection.notes
    _tensor_stats(state_dict, report)
    _refuse_nonfinite(state_dict, report, path)
    if folder is not None:
        return _load_folder(folder, state_dict, key_map, options, report)

    checkpoint_meta, sidecar_meta = checkpoint_metadata(raw), read_sidecar(path)
    choice = _choose_arch(options, raw, checkpoint_meta, sidecar_meta, state_dict, key_map, progress)
    report.arch, report.arch_kwargs, report.arch_source = choice.arch, choice.arch_kwargs, choice.source
    report.arch_detail, report.candidates = choice.detail, choice.candidates
    report.notes += choice.notes

    use_pickled = raw.trusted_module is not None and not options.arch
    model = raw.trusted_module if use_pickled else build_model(choice.arch, choice.arch_kwargs)
    assert model is not None  # use_pickled: the checkpoint holds a trusted module
    try:
        aligned = _align(state_dict, model, key_map, options, report, path)
    except KeyMappingError:
        classes = None if use_pickled or "num_classes" in choice.arch_kwargs else _head_classes(report)
        if classes is None:
            raise
        heads = [m.key for m in report.shape_mismatches]
        choice.arch_kwargs = {**choice.arch_kwargs, "num_classes": classes}  # the head's size, read off the weights
        report.arch_kwargs = choice.arch_kwargs
        model = build_model(choice.arch, choice.arch_kwargs)
        aligned = _align(state_dict, model, key_map, options, report, path)
        report.notes.append(inferred_note("num_classes", classes, "the head's weights", heads))
    _copy_weights(model, aligned)
    adapted = adapt_model(model, keep_aux=options.keep_aux)  # behind the tensor interface of its task
    model = adapted.model
    report.notes += adapted.notes
    report.ok = True
    metadata = CheckpointMetadata.parse({**sidecar_meta, **checkpoint_meta}, str(path), report.notes)
    return LoadedModel(model, choice.arch, choice.arch_kwargs, choice.source, report.sha256, metadata, report)


def _load_folder(
    folder: Folder, state_dict: dict[str, torch.Tensor], key_map: KeyMap, options: LoadOptions, report: LoadReport
) -> LoadedModel:
    """A checkpoint its model family reads by its own files: built by the family, its weights matched here."""
    report.arch, report.arch_source, report.arch_detail = folder.arch, folder.source, folder.detail

    def match(weights: dict[str, torch.Tensor], model: torch.nn.Module, renames: dict[str, str]) -> None:
        _copy_weights(model, _align(weights, model, key_map, options, report, folder.weights))
        report.renamed = {**renames, **report.renamed}

    built = folder.build(state_dict, match, report.notes)
    report.ok = True
    return LoadedModel(
        built.model, folder.arch, {}, folder.source, report.sha256, built.metadata, report, tokenizer=built.tokenizer
    )


def _tensor_stats(state_dict: dict[str, torch.Tensor], report: LoadReport) -> None:
    report.tensors = len(state_dict)
    report.parameters = sum(t.numel() for t in state_dict.values())
    report.dtypes = dict(Counter(str(t.dtype).removeprefix("torch.") for t in state_dict.values()))
    low = sorted(d for d in report.dtypes if d in ("float16", "bfloat16"))
    if low:
        report.notes.append(f"{' and '.join(low)} weights are converted to float32")


def _refuse_nonfinite(state_dict: dict[str, torch.Tensor], report: LoadReport, path: Path) -> None:
    report.nonfinite = [
        key for key, t in state_dict.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]
    if report.nonfinite:
        shown = ", ".join(report.nonfinite[:5]) + (
            f" and {len(report.nonfinite) - 5} more" if len(report.nonfinite) > 5 else ""
        )
        raise CheckpointError(
            f"{path}: NaN or Inf in {len(report.nonfinite)} tensors: {shown}",
            hint="the training run diverged or the file is corrupt; use an earlier checkpoint",
            details={"nonfinite": report.nonfinite},
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
    state_dict: dict[str, torch.Tensor],
    model: torch.nn.Module,
    key_map: KeyMap,
    options: LoadOptions,
    report: LoadReport,
    path: Path,
) -> dict[str, torch.Tensor]:
    """Rename checkpoint keys to the model's, compare strictly, and return the state dict to copy."""
    target = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    stripped = strip_wrappers(list(state_dict), set(target))
    report.stripped_prefixes = dict(Counter(old[: len(old) - len(new)] for old, new in stripped.items() if old != new))
    mapped, report.dropped, report.unused_key_map_rules = apply_key_map(list(stripped.values()), key_map)
    aligned: dict[str, torch.Tensor] = {}
    for old, tensor in state_dict.items():
        new = mapped.get(stripped[old])
        if new is None:
            continue
        if new in aligned:
            raise KeyMappingError(
                f"{path}: two checkpoint keys become {new!r} after renaming",
                hint="make the key-map rules more specific",
            )
        aligned[new] = tensor
        if new != old:
            report.renamed[old] = new
    if report.dropped:
        originals = {v: k for k, v in stripped.items()}
        report.dropped = [originals.get(k, k) for k in report.dropped]
    comparison = compare_keys(
        {k: tuple(v.shape) for k, v in aligned.items()}, target, options.allow_missing, options.allow_unexpected
    )
    report.missing_keys, report.unexpected_keys = comparison.missing, comparison.unexpected
    report.shape_mismatches = comparison.shape_mismatches
    report.allowed_missing, report.allowed_unexpected = comparison.allowed_missing, comparison.allowed_unexpected
    if comparison.missing and comparison.unexpected:
        report.suggestions = suggest_renames(
            {k: target[k] for k in comparison.missing}, {k: tuple(aligned[k].shape) for k in comparison.unexpected}
        )
    if not comparison.ok:
        raise KeyMappingError(
            f"{path} does not fit {report.arch}: {describe_problems(comparison)}",
            hint=_mismatch_hint(report),
        )
    return aligned


def _head_classes(report: LoadReport) -> int | None:
    """The class count when the only problem is a re-sized head: every mismatch differs in its first dimension
    alone, each in proportion to the class count the model was built with (a box regressor has 4 rows per class,
    an anchor head one per anchor and class), and nothing is missing or unexpected. A factory's default class
    count is unknown (an import path, a transformers class): there the head's rows are the classes. None when that
    is ambiguous."""
    mismatches = report.shape_mismatches
    if report.missing_keys or report.unexpected_keys or not mismatches:
        return None
    if not all(m.checkpoint[1:] == m.model[1:] and 0 < m.model[0] != m.checkpoint[0] for m in mismatches):
        return None
    arch = report.arch or ""
    if not is_registry_arch(arch):
        sizes = {m.checkpoint[0] for m in mismatches}
        return sizes.pop() if len(sizes) == 1 else None
    built = report.arch_kwargs.get("num_classes", default_num_classes(arch))
    implied = {m.checkpoint[0] * built / m.model[0] for m in mismatches}
    classes = implied.pop() if len(implied) == 1 else 0
    return int(classes) if classes == int(classes) and classes > 0 else None


def _mismatch_hint(report: LoadReport) -> str:
    if report.suggestions:
        rules = "; ".join(s.toml.replace("\n", " ") for s in report.suggestions[:3])
        return f"these look renamed; put in a --key-map TOML file: {rules}"
    classes = _head_classes(report)
    if classes is not None:
        return f"the head holds {classes} classes: pass --arch-kwargs '{{\"num_classes\": {classes}}}'"
    parts = []
    if report.missing_keys:
        globs = " ".join(f"--allow-missing '{p}.*'" for p, _ in group_keys(report.missing_keys, 3))
        parts.append(f"if deliberate (e.g. a re-initialised head): {globs}")
    if report.unexpected_keys:
        globs = " ".join(f"--allow-unexpected '{p}.*'" for p, _ in group_keys(report.unexpected_keys, 3))
        parts.append(f"to ignore extra weights: {globs}")
    parts.append("or map names with --key-map (docs/checkpoints.md)")
    return "; ".join(parts)


def _copy_weights(model: torch.nn.Module, aligned: dict[str, torch.Tensor]) -> None:
    """Copy into the model as float32 (fp16/bf16 checkpoints), leaving integer buffers as they are."""
    converted = {k: v.float() if v.is_floating_point() else v for k, v in aligned.items()}
    with torch.no_grad():
        model.load_state_dict(converted, strict=False)
    model.float().eval()
