"""Recognise an architecture from a state dict's key names and tensor shapes.

Each candidate (its model family's `candidates`: every torchvision classification, segmentation and detection model,
segmenters with and without their auxiliary head, and timm models whose pretrained config names a first conv present
in the checkpoint) is built once on the meta device with an unusual class count (PROBE_CLASSES); the tensors whose shape
carries a multiple of that count are its head (a detector's box regressor has 4 per class, an anchor-based
classifier one per anchor and class). Its signature is a hash of the other
keys and shapes (the body) plus the head's shapes with the class dimension left open, so one checkpoint lookup
finds exact matches, infers num_classes from the head, and also spots a checkpoint whose head was stripped.
`read_arch_kwargs` does the same for the one architecture named with --arch.
Signatures are cached in the process and on disk (~/.cache/modelship, keyed by torch/torchvision/timm versions).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from filelock import FileLock

from modelship.checkpoint.arch import build_on_meta
from modelship.checkpoint.families import AUX_VARIANT, families, family_of
from modelship.checkpoint.keymap import strip_all_wrappers
from modelship.contract.errors import ArchitectureError
from modelship.contract.json_object import JsonObject

PROBE_CLASSES = 1009  # a prime no layer width uses, so only head tensors carry it
SIGNATURE_SCHEMA = 2  # the cache file's layout: 2 = head dims as -k (multiples of the class count)
AUX_HEAD = "aux_classifier"  # the auxiliary head's module in torchvision's segmenters
Shapes = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class Signature:
    arch: str
    body: str  # sha1 of the sorted non-head (key, shape) pairs, keys without wrapper prefixes
    head: dict[str, list[int]]  # head key -> shape, -k where k times the class count goes
    default_num_classes: int
    keys: int
    arch_kwargs: JsonObject = field(default_factory=dict)  # what the candidate is built with (aux_loss)


@dataclass
class Match:
    arch: str
    arch_kwargs: JsonObject
    num_classes: int | None  # None when the checkpoint has no head
    head_keys: list[str]


@dataclass
class FingerprintResult:
    matches: list[Match] = field(default_factory=list)
    headless: list[Match] = field(default_factory=list)  # body matches, head absent from the checkpoint
    candidates: int = 0
    built: int = 0  # signatures computed now (not from a cache)
    seconds: float = 0.0


def body_hash(shapes: Shapes) -> str:
    text = "\n".join(f"{key}:{','.join(map(str, shape))}" for key, shape in sorted(shapes.items()))
    return hashlib.sha1(text.encode()).hexdigest()


def compute_signature(candidate: str) -> Signature | None:
    """Build `candidate` on the meta device with PROBE_CLASSES outputs; None when it cannot be built that way."""
    arch = candidate.removesuffix(AUX_VARIANT)
    kwargs: JsonObject = {"aux_loss": True} if candidate.endswith(AUX_VARIANT) else {}
    try:
        model = build_on_meta(arch, {**kwargs, "num_classes": PROBE_CLASSES})
    except ArchitectureError:
        return None
    shapes = {strip_all_wrappers(k): tuple(v.shape) for k, v in model.state_dict().items()}
    head = {
        k: [-(d // PROBE_CLASSES) if d and d % PROBE_CLASSES == 0 else d for d in s]
        for k, s in shapes.items()
        if any(d and d % PROBE_CLASSES == 0 for d in s)
    }
    if not head:
        return None
    body = {k: s for k, s in shapes.items() if k not in head}
    return Signature(arch, body_hash(body), head, default_num_classes(arch), len(shapes), kwargs)


def default_num_classes(arch: str) -> int:
    """The class count `arch` builds with when none is given (its family's: ImageNet's 1000, COCO's 91, ...)."""
    classes = family_of(arch).default_classes(arch)
    return 1000 if classes is None else classes


def cache_dir() -> Path:
    root = os.environ.get("MODELSHIP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelship"
    )
    return Path(root)


@cache
def _versions() -> str:
    import torch

    from modelship.checkpoint.families import families

    parts = [f"torch{torch.__version__}", *(v for family in families() if (v := family.version()))]
    return "-".join(parts).replace("+", "_")


class SignatureStore:
    """Per-process dict backed by one JSON file per library-version combination."""

    def __init__(self) -> None:
        self._memory: dict[str, Signature | None] = {}
        self._loaded_from: Path | None = None

    def _file(self) -> Path:
        return cache_dir() / f"fingerprints-v{SIGNATURE_SCHEMA}-{_versions()}.json"

    def _load_disk(self) -> None:
        path = self._file()
        if self._loaded_from == path:
            return
        self._loaded_from = path
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return
        for arch, sig in data.items():
            self._memory.setdefault(arch, Signature(**sig) if sig else None)

    def get_many(self, archs: list[str], progress: Callable[[int, int], None] | None = None) -> tuple[list, int]:
        """Signatures for `archs` (None for unbuildable ones) and how many had to be computed."""
        self._load_disk()
        todo = [a for a in archs if a not in self._memory]
        for done, arch in enumerate(todo, 1):
            self._memory[arch] = compute_signature(arch)
            if progress:
                progress(done, len(todo))
        if todo:
            self._save()
        return [self._memory[a] for a in archs], len(todo)

    def _save(self) -> None:
        path = self._file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path) + ".lock", timeout=30):
                try:
                    on_disk = json.loads(path.read_text())
                except (OSError, json.JSONDecodeError):
                    on_disk = {}
                on_disk.update({a: asdict(s) if s else None for a, s in self._memory.items()})
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(on_disk))
                tmp.replace(path)
        except OSError:
            return  # an unwritable cache only costs time


STORE = SignatureStore()


def fingerprint(shapes: Shapes, *, progress: Callable[[int, int], None] | None = None) -> FingerprintResult:
    """Every candidate architecture (each model family's, `ModelFamily.candidates`) whose keys and shapes equal the
    checkpoint's (wrapper prefixes ignored)."""
    start = time.perf_counter()
    normalized = {strip_all_wrappers(k): tuple(s) for k, s in shapes.items()}
    archs = [arch for family in families() for arch in family.candidates(set(normalized))]
    signatures, built = STORE.get_many(archs, progress)
    result = FingerprintResult(candidates=len(archs), built=built)
    by_head: dict[frozenset[str], list[Signature]] = {}
    for sig in signatures:
        if sig is not None and sig.keys - len(sig.head) <= len(normalized) <= sig.keys:
            by_head.setdefault(frozenset(sig.head), []).append(sig)
    for head_keys, sigs in by_head.items():
        body = _body_hash(normalized, head_keys)
        for match in filter(None, (_match(sig, normalized, body) for sig in sigs)):
            (result.headless if match.num_classes is None else result.matches).append(match)
    result.seconds = time.perf_counter() - start
    return result


def read_arch_kwargs(arch: str, shapes: Shapes, progress: Callable[[int, int], None] | None = None) -> Match | None:
    """The build kwargs a registry architecture needs to hold these weights (num_classes, a segmenter's aux_loss),
    read off them as `fingerprint` reads every candidate: `arch` without and with its auxiliary head, compared
    with the same signatures. None when neither fits or the checkpoint has no head."""
    normalized = {strip_all_wrappers(k): tuple(s) for k, s in shapes.items()}
    signatures, _ = STORE.get_many(family_of(arch).variants(arch), progress)
    for sig in filter(None, signatures):
        match = _match(sig, normalized, _body_hash(normalized, sig.head.keys()))
        if match is not None and match.num_classes is not None:
            return match
    return None


def _body_hash(shapes: Shapes, head_keys: Collection[str]) -> str:
    return body_hash({k: s for k, s in shapes.items() if k not in head_keys})


def _match(sig: Signature, shapes: Shapes, body: str) -> Match | None:
    """`sig` against the checkpoint's shapes (`body`: their hash without the signature's head keys): a match with
    the class count its head implies, a headless match (num_classes None), or None."""
    if sig.body != body:
        return None
    present = sig.head.keys() & shapes.keys()
    if not present:
        return Match(sig.arch, dict(sig.arch_kwargs), None, sorted(sig.head))
    num_classes = _head_classes(sig, shapes) if present == sig.head.keys() else None
    if num_classes is None:
        return None
    kwargs = dict(sig.arch_kwargs)
    if num_classes != sig.default_num_classes:
        kwargs["num_classes"] = num_classes
    return Match(sig.arch, kwargs, num_classes, sorted(sig.head))


def _head_classes(sig: Signature, shapes: Shapes) -> int | None:
    """The class count the checkpoint's head implies, or None when its shapes do not fit the signature."""
    counts = set()
    for key, template in sig.head.items():
        shape = shapes[key]
        if len(shape) != len(template):
            return None
        for want, got in zip(template, shape, strict=True):
            if want < 0:
                if got % -want:
                    return None
                counts.add(got // -want)
            elif want != got:
                return None
    return counts.pop() if len(counts) == 1 else None
