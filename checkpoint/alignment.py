"""Aligning a checkpoint's keys with its model's: wrapper prefixes stripped, the key map applied, a strict comparison
with rename suggestions; and, when they do not fit, the one-line refusal with the likeliest fix."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from modelship.checkpoint.arch import is_registry_arch
from modelship.checkpoint.fingerprint import default_num_classes
from modelship.checkpoint.keymap import KeyMap, RenameSuggestion, apply_key_map, strip_wrappers, suggest_renames
from modelship.checkpoint.matching import KeyComparison, compare_keys, describe_problems, group_keys
from modelship.checkpoint.resolve import ArchChoice
from modelship.contract.errors import KeyMappingError


@dataclass(frozen=True)
class KeyAlignment:
    """The key mapping and matching step: the wrapper prefixes stripped, the keys renamed and dropped on the way to
    the model's names, how the result compares with the model's keys, and the weights to copy under those names."""

    tensors: dict[str, torch.Tensor]
    stripped_prefixes: dict[str, int]
    renamed: dict[str, str]  # checkpoint key -> model key, for every key that changed
    dropped: tuple[str, ...]
    unused_key_map_rules: tuple[str, ...]
    comparison: KeyComparison
    suggestions: tuple[RenameSuggestion, ...] = ()
    collision: str | None = None  # a model key two checkpoint keys became: the keys are not compared then

    @property
    def ok(self) -> bool:
        return self.collision is None and self.comparison.ok

    def with_renames(self, renames: dict[str, str]) -> KeyAlignment:
        """This alignment with a model family's own renames listed before the key map's."""
        return replace(self, renamed={**renames, **self.renamed})


NOTHING_ALIGNED = KeyAlignment({}, {}, {}, (), (), KeyComparison())


def align_keys(
    state_dict: dict[str, torch.Tensor],
    model: torch.nn.Module,
    key_map: KeyMap,
    allow_missing: Iterable[str],
    allow_unexpected: Iterable[str],
) -> KeyAlignment:
    """Rename the checkpoint's keys to the model's (wrapper prefixes, then the key map) and compare them strictly."""
    target = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    stripped = strip_wrappers(list(state_dict), set(target))
    prefixes = dict(Counter(old[: len(old) - len(new)] for old, new in stripped.items() if old != new))
    mapped, dropped, unused = apply_key_map(list(stripped.values()), key_map)
    originals = {new: old for old, new in stripped.items()}
    dropped_keys = tuple(originals.get(k, k) for k in dropped)
    aligned: dict[str, torch.Tensor] = {}
    renamed: dict[str, str] = {}
    for old, tensor in state_dict.items():
        new = mapped.get(stripped[old])
        if new is None:
            continue
        if new in aligned:
            return KeyAlignment(aligned, prefixes, renamed, dropped_keys, tuple(unused), KeyComparison(), collision=new)
        aligned[new] = tensor
        if new != old:
            renamed[old] = new
    comparison = compare_keys({k: tuple(v.shape) for k, v in aligned.items()}, target, allow_missing, allow_unexpected)
    suggestions: tuple[RenameSuggestion, ...] = ()
    if comparison.missing and comparison.unexpected:
        suggestions = tuple(
            suggest_renames(
                {k: target[k] for k in comparison.missing}, {k: tuple(aligned[k].shape) for k in comparison.unexpected}
            )
        )
    return KeyAlignment(aligned, prefixes, renamed, dropped_keys, tuple(unused), comparison, suggestions)


def refuse_misfit(keys: KeyAlignment, arch: ArchChoice, path: Path) -> None:
    """A KeyMappingError naming what does not fit and the likeliest fix, unless every key fits."""
    if keys.collision is not None:
        raise KeyMappingError(
            f"{path}: two checkpoint keys become {keys.collision!r} after renaming",
            hint="make the key-map rules more specific",
        )
    if not keys.ok:
        raise KeyMappingError(
            f"{path} does not fit {arch.arch}: {describe_problems(keys.comparison)}", hint=_mismatch_hint(keys, arch)
        )


def head_classes(comparison: KeyComparison, arch: ArchChoice) -> int | None:
    """The class count when the only problem is a re-sized head: every mismatch differs in its first dimension
    alone, each in proportion to the class count the model was built with (a box regressor has 4 rows per class,
    an anchor head one per anchor and class), and nothing is missing or unexpected. A factory's default class
    count is unknown (an import path, a transformers class): there the head's rows are the classes. None when that
    is ambiguous."""
    mismatches = comparison.shape_mismatches
    if comparison.missing or comparison.unexpected or not mismatches:
        return None
    if not all(m.checkpoint[1:] == m.model[1:] and 0 < m.model[0] != m.checkpoint[0] for m in mismatches):
        return None
    if not is_registry_arch(arch.arch):
        sizes = {m.checkpoint[0] for m in mismatches}
        return sizes.pop() if len(sizes) == 1 else None
    built = arch.arch_kwargs.get("num_classes", default_num_classes(arch.arch))
    implied = {m.checkpoint[0] * built / m.model[0] for m in mismatches}
    classes = implied.pop() if len(implied) == 1 else 0
    return int(classes) if classes == int(classes) and classes > 0 else None


def _mismatch_hint(keys: KeyAlignment, arch: ArchChoice) -> str:
    if keys.suggestions:
        rules = "; ".join(s.toml.replace("\n", " ") for s in keys.suggestions[:3])
        return f"these look renamed; put in a --key-map TOML file: {rules}"
    classes = head_classes(keys.comparison, arch)
    if classes is not None:
        return f"the head holds {classes} classes: pass --arch-kwargs '{{\"num_classes\": {classes}}}'"
    parts = []
    if keys.comparison.missing:
        globs = " ".join(f"--allow-missing '{p}.*'" for p, _ in group_keys(keys.comparison.missing, 3))
        parts.append(f"if deliberate (e.g. a re-initialised head): {globs}")
    if keys.comparison.unexpected:
        globs = " ".join(f"--allow-unexpected '{p}.*'" for p, _ in group_keys(keys.comparison.unexpected, 3))
        parts.append(f"to ignore extra weights: {globs}")
    parts.append("or map names with --key-map (docs/checkpoints.md)")
    return "; ".join(parts)
