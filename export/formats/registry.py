"""The registries a format fills from its own package (export.formats.onnx, .torchscript, .pt2): how its fp32
artifacts are exported (`FORMATS`), how `modelship parity` loads each of its artifact files (`ARTIFACT_RUNNERS`) and
how Triton serves them (`SERVED_FILES`, `PLATFORMS`). The facts a manifest is read back against (its flag, its
artifacts and their files) are the contract's (contract.artifacts), registered from the same package.

An exporter's `start(build)` writes its fp32 artifacts into the build's staging folder and verifies them,
returning one `Started` per artifact: what it wrote (the format's variants are built from it:
export.precision.registry) and a `Finish` that gives the `BuiltArtifact` (waiting for a verification still running
on `build.background`, as TorchScript's does). Exporters start by `order`, lowest first, so one whose verification
overlaps the next export (TorchScript) goes first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelship.contract.registry import Registry

if TYPE_CHECKING:
    from modelship.contract.manifest import Artifact
    from modelship.export.build import Build, Started
    from modelship.parity.runner_protocol import Runner


@dataclass(frozen=True)
class FormatExporter:
    """`format`: the name `--torchscript` / `--onnx` / `--pt2` choose (ExportSpec.formats); `start(build)`: write
    and verify this format's fp32 artifacts; `order`: when it starts among the formats asked for."""

    format: str
    start: Callable[[Build], list[Started]]
    order: int = 100


FORMATS: Registry[FormatExporter] = Registry("export format")


def register_format(exporter: FormatExporter, *, replace: bool = False) -> FormatExporter:
    return FORMATS.add(exporter.format, exporter, replace=replace)


# an artifact file, its manifest entry and whether ONNX Runtime runs in a worker process of its own -> its runner
Loader = Callable[[Path, "Artifact", bool], "Runner"]
ARTIFACT_RUNNERS: Registry[Loader] = Registry("artifact runner")  # artifact format -> its loader


def register_artifact_runner(artifact_format: str, loader: Loader, *, replace: bool = False) -> Loader:
    return ARTIFACT_RUNNERS.add(artifact_format, loader, replace=replace)


SERVED_FILES: Registry[str] = Registry("served file")  # artifact format -> the file Triton's backend loads
PLATFORMS: Registry[str] = Registry("Triton platform")  # artifact format -> the Triton platform serving it


def register_served(artifact_format: str, *, platform: str, file: str, replace: bool = False) -> None:
    """An artifact format Triton serves: the backend's platform and the file name it loads in a version folder."""
    PLATFORMS.add(artifact_format, platform, replace=replace)
    SERVED_FILES.add(artifact_format, file, replace=replace)
