"""How `modelship parity` runs each kind of artifact file, registered by the artifact's format: a loader takes the
file, its manifest entry and whether ONNX Runtime runs in a worker process of its own, and returns the runner
(closed by the caller). A new format registers its loader here beside its exporter (export.formats)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from modelship.contract.errors import ParityError
from modelship.contract.manifest import Artifact
from modelship.contract.registry import Registry
from modelship.parity.runner_protocol import Runner

Loader = Callable[[Path, Artifact, bool], Runner]
ARTIFACT_RUNNERS: Registry[Loader] = Registry("artifact runner")


def register_artifact_runner(artifact_format: str, loader: Loader, *, replace: bool = False) -> Loader:
    return ARTIFACT_RUNNERS.add(artifact_format, loader, replace=replace)


@contextlib.contextmanager
def artifact_runner(folder: Path, artifact: Artifact, *, isolated: bool = True) -> Iterator[Runner]:
    """The runner of one artifact file of an export, closed afterwards."""
    runner = ARTIFACT_RUNNERS.find(artifact.format)(folder / artifact.file, artifact, isolated)
    try:
        yield runner
    finally:
        runner.close()


def _onnx(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    from modelship.parity import OnnxRuntimeRunner

    return OnnxRuntimeRunner(path, artifact.io, name=artifact.name, isolated=isolated)


def _torchscript(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    from modelship.export.torchscript import load_torchscript
    from modelship.parity import TorchRunner

    try:
        module: Any = load_torchscript(path)
    except RuntimeError as exc:
        raise ParityError(f"{path}: TorchScript file cannot be loaded ({str(exc).splitlines()[0]})") from None
    return TorchRunner(module, artifact.io, name=artifact.name)


def _exported_program(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    from modelship.export.pt2_export import load_aoti, load_program
    from modelship.parity import TorchRunner

    return TorchRunner((load_program if artifact.format == "pt2" else load_aoti)(path), artifact.io, artifact.name)


register_artifact_runner("onnx", _onnx)
register_artifact_runner("torchscript", _torchscript)
register_artifact_runner("pt2", _exported_program)
register_artifact_runner("aoti", _exported_program)
