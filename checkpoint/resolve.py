"""Which architecture to build: --arch, else checkpoint metadata, else the sidecar, else the fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelship.checkpoint.arch import canonical_arch, check_data_arch, is_registry_arch
from modelship.checkpoint.families import TrainingRecord, family_of
from modelship.checkpoint.fingerprint import AUX_HEAD, FingerprintResult, Match, fingerprint, read_arch_kwargs
from modelship.checkpoint.keymap import strip_all_wrappers
from modelship.checkpoint.matching import summarize
from modelship.checkpoint.metadata import sidecar_path
from modelship.contract.errors import ArchitectureError, ModelshipError
from modelship.contract.json_object import JsonObject

Shapes = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class ArchChoice:
    """The architecture to build, with the kwargs to build it with, where it was found and how."""

    arch: str
    arch_kwargs: JsonObject
    source: str  # "flag" | "checkpoint" | "sidecar" | "fingerprint" (or a model family's own, e.g. "config.json")
    detail: str
    candidates: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def resolve_arch(
    *,
    flag: str | None,
    flag_kwargs: JsonObject | None,
    checkpoint_meta: JsonObject,
    sidecar_meta: JsonObject,
    record: TrainingRecord | None,
    shapes: Shapes,
    checkpoint_name: str,
    progress: Callable[[int, int], None] | None = None,
    trust: bool = False,
) -> ArchChoice:
    """Resolve in order: flag, checkpoint metadata (incl. timm train args), sidecar, fingerprint.

    Only the flag may name an import path (`package.module:Factory`): from the checkpoint or its sidecar, an
    import path or arch_kwargs outside the registry factories' plain parameters are refused (`check_data_arch`)
    unless `trust` (--trust-checkpoint), so reading a file never imports or calls code it names.
    """
    if flag:
        return _from_flag(canonical_arch(flag), dict(flag_kwargs or {}), shapes, progress)
    notes: list[str] = []
    sidecar = str(sidecar_path(Path(checkpoint_name)))
    sources = [
        ("checkpoint", checkpoint_meta, "'arch' stored in the checkpoint", checkpoint_name),
        ("checkpoint", record.fields if record else {}, record.detail if record else "", checkpoint_name),
        ("sidecar", sidecar_meta, f"sidecar {Path(sidecar).name}", sidecar),
    ]
    for source, meta, detail, file in sources:
        if meta.get("arch") is None:
            continue
        check_data_arch(meta.get("arch"), meta.get("arch_kwargs"), file=file, trust=trust)
        try:
            arch = canonical_arch(meta["arch"])
        except ModelshipError as exc:
            notes.append(f"ignored {detail}: {exc.message}")
            continue
        kwargs = dict(meta.get("arch_kwargs") or {})
        if flag_kwargs:
            kwargs.update(flag_kwargs)
        return ArchChoice(arch, kwargs, source, detail, notes=tuple(notes))
    return _from_fingerprint(shapes, flag_kwargs, checkpoint_name, notes, progress)


def _from_flag(arch: str, given: JsonObject, shapes: Shapes, progress: Callable[[int, int], None] | None) -> ArchChoice:
    """--arch: a registry architecture is built with the kwargs its weights imply (num_classes, a segmenter's
    aux_loss), read as the fingerprint reads them, each noted; an --arch-kwargs entry wins over what the weights
    say. An import path is built with --arch-kwargs alone."""
    match = read_arch_kwargs(arch, shapes, progress) if is_registry_arch(arch) else None
    if match is None:
        return ArchChoice(arch, given, "flag", "--arch")
    inferred = {k: v for k, v in match.arch_kwargs.items() if k not in given}
    keys = [strip_all_wrappers(k) for k in shapes]
    evidence = {
        "num_classes": ("the head's weights", [k for k in keys if k in match.head_keys]),
        "aux_loss": ("the auxiliary head's weights", [k for k in keys if k.startswith(f"{AUX_HEAD}.")]),
    }
    notes = tuple(inferred_note(k, v, *evidence[k]) for k, v in inferred.items())
    return ArchChoice(arch, {**inferred, **given}, "flag", "--arch", notes=notes)


def inferred_note(kwarg: str, value: Any, part: str, keys: Sequence[str]) -> str:
    """The report's note for a build kwarg read off the weights: its value and the tensors it was read from."""
    shown = ", ".join(keys) if len(keys) <= 4 else summarize(keys, 2)
    return f"{kwarg}={value} inferred from {part} ({shown})"


def _from_fingerprint(
    shapes: Shapes,
    flag_kwargs: JsonObject | None,
    checkpoint_name: str,
    notes: list[str],
    progress: Callable[[int, int], None] | None,
) -> ArchChoice:
    result = fingerprint(shapes, progress=progress)
    searched = f"{result.candidates} candidate architectures ({result.seconds:.2f} s, {result.built} built now)"
    best = min((family_of(m.arch).preference for m in result.matches), default=0)
    tier = [m for m in result.matches if family_of(m.arch).preference == best]  # torchvision before timm
    if len(tier) == 1:
        match = tier[0]
        others = [m.arch for m in result.matches if m is not match]
        if others:
            notes.append(
                f"the same keys and shapes also fit {', '.join(others)}: {family_of(match.arch).name} is preferred; "
                "pass --arch if the checkpoint was trained with one of those"
            )
        kwargs = {**match.arch_kwargs, **(flag_kwargs or {})}
        head_key = next((k for k in match.head_keys if k.endswith("weight")), match.head_keys[0])
        head = f"num_classes={match.num_classes} from {head_key}"
        return ArchChoice(
            match.arch,
            kwargs,
            "fingerprint",
            f"key names and shapes match {match.arch} ({head}); searched {searched}",
            tuple(m.arch for m in result.matches),
            tuple(notes),
        )
    raise _no_unique_match(result, tier, checkpoint_name, searched)


def _no_unique_match(
    result: FingerprintResult, tier: list[Match], checkpoint_name: str, searched: str
) -> ArchitectureError:
    details = {
        "candidates": [m.arch for m in tier],
        "headless_candidates": [m.arch for m in result.headless],
        "fingerprint_seconds": round(result.seconds, 3),
    }
    if tier:
        names = ", ".join(f"{m.arch} {m.arch_kwargs or ''}".strip() for m in tier)
        return ArchitectureError(
            f"{checkpoint_name}: keys and shapes match {len(tier)} architectures: {names}",
            hint=f"choose one with --arch, e.g. --arch {tier[0].arch}",
            details=details,
        )
    if result.headless:
        head = result.headless[0]
        globs = sorted({key.rpartition(".")[0] + ".*" for key in head.head_keys})
        allow = " ".join(f"--allow-missing '{g}'" for g in globs)
        return ArchitectureError(
            f"{checkpoint_name}: no classifier head; the rest matches "
            + ", ".join(m.arch for m in result.headless[:5]),
            hint=f"to load it with a freshly initialised head: --arch {head.arch} {allow}",
            details=details,
        )
    return ArchitectureError(
        f"{checkpoint_name}: architecture not recognised among {searched}",
        hint="pass --arch (torchvision name, timm/NAME or package.module:Factory) and --arch-kwargs, "
        "or write a sidecar (see docs/checkpoints.md)",
        details=details,
    )
