"""`manifest.json`: what an export folder holds, where it came from, and the proof that its numbers are right.

Written by `export-model`, read by `modelship parity` and `modelship publish`, copied beside every published
Triton model. Paths inside are relative to the export folder.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship.contract.artifact_details import ArtifactDetails, details_for
from modelship.contract.artifacts import ARTIFACT_FORMATS
from modelship.contract.errors import ModelshipError, PreprocessError
from modelship.contract.iospec import IOSpec
from modelship.contract.json_object import JsonObject
from modelship.contract.parity_report import ParityReport
from modelship.contract.precisions import PRECISIONS
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tokenizer import TokenizerSpec

EXPORT_MANIFEST = "manifest.json"  # an export folder's manifest (a published version folder holds modelship.json)
SCHEMA_VERSION = 1
DEFAULT_TASK = "classification"  # the task of manifests written before tasks were recorded (modelship.tasks)


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks: how checkpoints and artifacts are identified in a manifest."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class StepTiming:
    """How long one export step took (`artifact`: the artifact it built or verified, None for shared steps)."""

    step: str
    seconds: float
    artifact: str | None = None
    ok: bool = True

    def to_dict(self) -> JsonObject:
        return {"step": self.step, "artifact": self.artifact, "seconds": round(self.seconds, 4), "ok": self.ok}

    @classmethod
    def from_dict(cls, data: JsonObject) -> StepTiming:
        return cls(data["step"], float(data["seconds"]), data.get("artifact"), bool(data.get("ok", True)))


@dataclass(frozen=True)
class ExportFile:
    """A file beside the artifacts that served answers depend on (`role`: "tokenizer", a text model's
    tokenizer.json), hashed at export; publish and parity refuse it when it changed."""

    role: str
    file: str
    sha256: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "file": self.file, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: JsonObject) -> ExportFile:
        return cls(str(data["role"]), str(data["file"]), str(data["sha256"]))


def file_change(folder: Path, file: str, sha256: str, what: str) -> str | None:
    """Why `folder/file` (`what`, e.g. "artifact 'onnx'") is not the file the export verified: missing, or its
    sha256 differs from `sha256` (an empty one is not checked); None when it is that file."""
    path = Path(folder) / file
    if not path.is_file():
        return f"{path.name} is missing ({what} listed in the manifest; re-export)"
    actual = sha256_file(path)
    if not sha256 or actual == sha256:
        return None
    return (
        f"{path.name} changed since export: sha256 {actual[:12]}, manifest {sha256[:12]} "
        "(re-export, or restore the verified file)"
    )


@dataclass
class Source:
    """The checkpoint an export was made from and how its architecture was resolved."""

    checkpoint: str
    sha256: str
    arch: str
    arch_kwargs: JsonObject = field(default_factory=dict)
    arch_source: str = "flag"


@dataclass
class Artifact:
    """One exported file. `io` is the artifact's own I/O (fp16 I/O for `--fp16-io` variants)."""

    name: str
    format: str
    precision: str
    file: str
    sha256: str
    io: IOSpec
    parity: ParityReport | None = None  # the verification it passed at export
    details: ArtifactDetails | None = None  # None: the format's defaults

    def __post_init__(self) -> None:
        if self.details is None:
            self.details = details_for(self.format, artifact=self.name)
        if self.format not in ARTIFACT_FORMATS:
            raise ValueError(f"artifact format must be one of {tuple(ARTIFACT_FORMATS)}, got {self.format!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"artifact precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "format": self.format,
            "precision": self.precision,
            "file": self.file,
            "sha256": self.sha256,
            "io": self.io.to_dict(),
            "parity": self.parity.to_dict() if self.parity is not None else {},
            "details": self.details.to_dict() if self.details is not None else {},
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Artifact:
        return cls(
            name=data["name"],
            format=data["format"],
            precision=data["precision"],
            file=data["file"],
            sha256=data["sha256"],
            io=IOSpec.from_dict(data["io"]),
            parity=ParityReport.from_dict(data["parity"]) if data.get("parity") else None,
            details=details_for(data["format"], data.get("details"), data["name"]),
        )


@dataclass(frozen=True)
class Declined:
    """A variant asked for that the export did not write, why in one line (INT8 measured slower than fp32 here, or
    not accurate enough after every try, with the closest figures), and what its exporter recorded on the way."""

    name: str
    reason: str
    details: ArtifactDetails | None = None

    def to_dict(self) -> JsonObject:
        data: JsonObject = {"name": self.name, "reason": self.reason}
        return data | ({"details": self.details.to_dict()} if self.details is not None else {})

    @classmethod
    def from_dict(cls, data: JsonObject) -> Declined:
        details = data.get("details")
        typed = details_for(str(details.get("format", "")), details, str(data["name"])) if details else None
        return cls(str(data["name"]), str(data["reason"]), typed)


@dataclass
class Manifest:
    """Everything known about one export, typed: reading a manifest validates every part of it once."""

    name: str
    source: Source
    io: IOSpec
    artifacts: list[Artifact] = field(default_factory=list)
    task: str = DEFAULT_TASK
    preprocess: PreprocessSpec | None = None
    labels: list[str] | None = None
    tokenizer: TokenizerSpec | None = None  # a text model's tokenizer (its file is in the export folder)
    files: list[ExportFile] = field(default_factory=list)  # what served answers depend on besides the artifacts
    score_threshold: float | None = None  # a detector's: it drops boxes scoring below (parity's score edge)
    golden: str | None = None
    timings: list[StepTiming] = field(default_factory=list)
    declined: list[Declined] = field(default_factory=list)  # variants asked for and not written
    tool_version: str = ""
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def artifact(self, name: str) -> Artifact:
        for art in self.artifacts:
            if art.name == name:
                return art
        known = ", ".join(a.name for a in self.artifacts) or "none"
        raise ModelshipError(f"export {self.name!r} has no artifact {name!r}", hint=f"artifacts: {known}")

    def refuse_changed_files(self, folder: Path, error: type[ModelshipError]) -> None:
        """`error` naming the first file beside the artifacts that is not the one the export verified: one of
        `files` missing or changed, or a tokenizer with no sha256 to check it by (a manifest written before
        tokenizers were hashed: reading it as nothing to check would serve an unverified tokenizer)."""
        reasons = [r for f in self.files if (r := file_change(folder, f.file, f.sha256, f"the {f.role}"))]
        if self.tokenizer is not None and self.tokenizer.file not in {f.file for f in self.files}:
            reasons.append(
                f"{self.tokenizer.file} has no sha256 in {EXPORT_MANIFEST} (exported before tokenizers were hashed), "
                "so it cannot be checked (re-export)"
            )
        if reasons:
            raise error(f"export {self.name!r}: {reasons[0]}")

    def to_dict(self) -> JsonObject:
        return {
            "schema_version": self.schema_version,
            "name": self.name,
            "task": self.task,
            "tool_version": self.tool_version,
            "created": self.created,
            "source": vars(self.source),
            "io": self.io.to_dict(),
            "preprocess": self.preprocess.to_dict() if self.preprocess is not None else None,
            "labels": self.labels,
            "tokenizer": self.tokenizer.to_dict() if self.tokenizer is not None else None,
            "files": [f.to_dict() for f in self.files],
            "score_threshold": self.score_threshold,
            "golden": self.golden,
            "timings": [t.to_dict() for t in self.timings],
            "declined": [d.to_dict() for d in self.declined],
            "artifacts": [a.to_dict() for a in self.artifacts],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Manifest:
        version = data.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {version!r}: this modelship reads versions 1 to {SCHEMA_VERSION}; re-export, or "
                "upgrade modelship for a newer manifest"
            )
        return cls(
            name=data["name"],
            source=Source(**data["source"]),
            io=IOSpec.from_dict(data["io"]),
            artifacts=[Artifact.from_dict(a) for a in data.get("artifacts", [])],
            task=data.get("task", DEFAULT_TASK),
            preprocess=_preprocess(data.get("preprocess")),
            labels=data.get("labels"),
            tokenizer=TokenizerSpec.from_dict(data["tokenizer"]) if data.get("tokenizer") else None,
            files=[ExportFile.from_dict(f) for f in data.get("files", [])],  # none before files were hashed
            score_threshold=data.get("score_threshold"),
            golden=data.get("golden"),
            timings=[StepTiming.from_dict(t) for t in data.get("timings", [])],
            declined=[Declined.from_dict(d) for d in data.get("declined", [])],
            tool_version=data.get("tool_version", ""),
            created=data.get("created", ""),
            schema_version=version,
        )

    def write(self, folder: Path) -> Path:
        path = Path(folder) / EXPORT_MANIFEST
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = Path(folder) / EXPORT_MANIFEST
        if not path.is_file():
            raise ModelshipError(f"{folder}: no {EXPORT_MANIFEST} here", hint="pass a folder written by export-model")
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ModelshipError(f"{path}: not a valid modelship manifest ({exc})") from None


def _preprocess(data: Any) -> PreprocessSpec | None:
    if data is None:
        return None
    try:
        return PreprocessSpec.from_dict(data)
    except PreprocessError as exc:
        raise ValueError(f"field 'preprocess' is invalid: {exc.message}") from None
