"""How `modelship parity` runs a TorchScript artifact file: loaded on the CPU, a file that is not TorchScript
refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelship.contract.errors import ParityError
from modelship.contract.manifest import Artifact
from modelship.export.formats.registry import register_artifact_runner
from modelship.export.formats.torchscript import FORMAT
from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.parity import TorchRunner
from modelship.parity.runner_protocol import Runner


def load(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    try:
        module: Any = load_torchscript(path)
    except RuntimeError as exc:
        raise ParityError(f"{path}: TorchScript file cannot be loaded ({str(exc).splitlines()[0]})") from None
    return TorchRunner(module, artifact.io, name=artifact.name)


register_artifact_runner(FORMAT, load)
