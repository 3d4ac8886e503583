"""How `modelship parity` runs an ONNX artifact file: in ONNX Runtime, in a worker process of its own when asked."""

from __future__ import annotations

from pathlib import Path

from modelship.contract.manifest import Artifact
from modelship.export.formats.onnx import FORMAT
from modelship.export.formats.registry import register_artifact_runner
from modelship.parity import OnnxRuntimeRunner
from modelship.parity.runner_protocol import Runner


def load(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    return OnnxRuntimeRunner(path, artifact.io, name=artifact.name, isolated=isolated)


register_artifact_runner(FORMAT, load)
