"""Key changes between a checkpoint and its model: wrapper prefixes, the user's key map, rename suggestions.

Wrapper prefixes (`module.` from DDP, `_orig_mod.` from torch.compile, `model.` from Lightning) are removed
*because* removing them makes a key match the target model, never blindly: a model whose own parameters start
with `model.` keeps them. The key map (`--key-map FILE`, JSON or TOML) then applies explicit drops, renames and
regex rewrites to the keys as they are after prefix removal.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject

WRAPPER_PREFIXES = ("module.", "_orig_mod.", "model.")
KEY_MAP_FIELDS = ("drop", "rename", "regex")


@dataclass
class KeyMap:
    """Drops (fnmatch globs), exact renames, then ordered regex rewrites (`re.sub` on each key)."""

    drop: list[str] = field(default_factory=list)
    rename: dict[str, str] = field(default_factory=dict)
    regex: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for pattern, replace in self.regex:
            try:
                re.compile(pattern).sub(replace, "")  # compiles the replacement too: bad group references fail here
            except (re.error, IndexError) as exc:
                raise re.error(f"regex rule {pattern!r} -> {replace!r}: {exc}") from None


def load_key_map(path: Path) -> KeyMap:
    """Read a key-map file; any problem is a UsageError naming the file."""
    hint = "see 'Key maps' in docs/checkpoints.md for the schema"
    if not path.is_file():
        raise UsageError(f"--key-map {path}: no such file", hint="check the path")
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--key-map {path}: not valid {path.suffix.lstrip('.') or 'JSON'} ({exc})", hint=hint) from exc
    if not isinstance(data, dict) or set(data) - set(KEY_MAP_FIELDS):
        extra = sorted(set(data) - set(KEY_MAP_FIELDS)) if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"--key-map {path}: unknown fields {extra}; allowed: {', '.join(KEY_MAP_FIELDS)}", hint=hint)
    try:
        drop = data.get("drop", [])
        rename = data.get("rename", {})
        regex = [(rule["pattern"], rule["replace"]) for rule in data.get("regex", [])]
        if not (isinstance(drop, list) and all(isinstance(d, str) for d in drop)):
            raise TypeError("'drop' must be a list of glob strings")
        if not (isinstance(rename, dict) and all(isinstance(v, str) for v in rename.values())):
            raise TypeError("'rename' must map old key -> new key")
        return KeyMap(drop=drop, rename=dict(rename), regex=regex)
    except (TypeError, KeyError, re.error) as exc:
        raise UsageError(f"--key-map {path}: {exc}", hint=hint) from exc


def wrapper_chain(key: str) -> str:
    """The leading run of wrapper prefixes of `key`, e.g. 'module._orig_mod.' for 'module._orig_mod.fc.weight'."""
    chain = ""
    rest = key
    while True:
        prefix = next((p for p in WRAPPER_PREFIXES if rest.startswith(p)), None)
        if prefix is None:
            return chain
        chain += prefix
        rest = rest[len(prefix) :]


def strip_wrappers(keys: list[str], target: set[str]) -> dict[str, str]:
    """Map each key to itself minus the wrapper prefixes whose removal makes it a key of `target`.

    A key with no matching form (e.g. a renamed layer) loses the prefix most other keys lost, so the key map
    and the suggestions see it beside its siblings.
    """
    result: dict[str, str] = {}
    used: Counter[str] = Counter()
    unresolved = []
    for key in keys:
        chain = wrapper_chain(key)
        cuts = [chain[:i] for i in range(len(chain) + 1) if i == 0 or chain[i - 1] == "."]
        cut = next((c for c in cuts if key[len(c) :] in target), None)
        if cut is None:
            unresolved.append(key)
            continue
        result[key] = key[len(cut) :]
        used[cut] += 1
    dominant = used.most_common(1)[0][0] if used else ""
    for key in unresolved:
        result[key] = key[len(dominant) :] if dominant and key.startswith(dominant) else key
    return result


def strip_all_wrappers(key: str) -> str:
    """The key without any leading wrapper prefixes (used to compare against fingerprints)."""
    return key[len(wrapper_chain(key)) :]


def apply_key_map(keys: list[str], key_map: KeyMap) -> tuple[dict[str, str], list[str], list[str]]:
    """Apply drops, renames and regex rewrites: (old -> new for kept keys, dropped keys, unused rules)."""
    used: set[str] = set()
    mapping: dict[str, str] = {}
    dropped: list[str] = []
    for key in keys:
        drop_rule = next((g for g in key_map.drop if fnmatch.fnmatchcase(key, g)), None)
        if drop_rule is not None:
            dropped.append(key)
            used.add(f"drop {drop_rule}")
            continue
        new = key
        if key in key_map.rename:
            new = key_map.rename[key]
            used.add(f"rename {key}")
        for pattern, replace in key_map.regex:
            rewritten = re.sub(pattern, replace, new)
            if rewritten != new:
                used.add(f"regex {pattern}")
                new = rewritten
        mapping[key] = new
    rules = (
        [f"drop {g}" for g in key_map.drop]
        + [f"rename {k}" for k in key_map.rename]
        + [f"regex {p}" for p, _ in key_map.regex]
    )
    return mapping, dropped, [r for r in rules if r not in used]


@dataclass(frozen=True)
class RenameSuggestion:
    """Checkpoint keys that look renamed to the model's missing ones, with the key-map rule that renames them (as the
    key map's JSON and as its TOML)."""

    old: list[str]
    new: list[str]
    rule: JsonObject
    toml: str

    def to_dict(self) -> JsonObject:
        return {"from": self.old, "to": self.new, "rule": self.rule, "toml": self.toml}

    @classmethod
    def from_dict(cls, data: JsonObject) -> RenameSuggestion:
        return cls(list(data["from"]), list(data["to"]), dict(data["rule"]), str(data["toml"]))


def suggest_renames(
    missing: dict[str, tuple[int, ...]], unexpected: dict[str, tuple[int, ...]], cutoff: float = 0.6
) -> list[RenameSuggestion]:
    """Pair missing and unexpected keys that look like a rename (same shape, similar name) and give the rule.

    Pairs that rename one module (`fc_1.weight`, `fc_1.bias` -> `fc1.*`) collapse into one regex rule.
    """
    pairs: list[tuple[str, str]] = []
    free = dict(unexpected)
    for new, shape in missing.items():
        same_shape = [old for old, s in free.items() if s == shape]
        close = difflib.get_close_matches(new, same_shape, n=1, cutoff=cutoff)
        if close:
            pairs.append((close[0], new))
            del free[close[0]]
    by_module: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for old, new in pairs:
        old_mod, _, old_leaf = old.rpartition(".")
        new_mod, _, new_leaf = new.rpartition(".")
        group = (old_mod, new_mod) if old_leaf == new_leaf and old_mod and new_mod else (old, new)
        by_module.setdefault(group, []).append((old, new))
    suggestions = []
    for (old_mod, new_mod), members in by_module.items():
        if len(members) > 1:
            pattern = "^" + re.escape(old_mod + ".")
            suggestions.append(
                RenameSuggestion(
                    old=[old for old, _ in members],
                    new=[new for _, new in members],
                    rule={"regex": [{"pattern": pattern, "replace": new_mod + "."}]},
                    toml=f"[[regex]]\npattern = '{pattern}'\nreplace = '{new_mod}.'",
                )
            )
        else:
            old, new = members[0]
            suggestions.append(RenameSuggestion([old], [new], {"rename": {old: new}}, f'[rename]\n"{old}" = "{new}"'))
    return suggestions
