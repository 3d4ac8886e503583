"""How `modelship parity` runs torch.export's artifact files: the ExportedProgram (`pt2`) and the AOTInductor
package (`aoti`), each loaded back and run like an eager module."""

from __future__ import annotations

from pathlib import Path

from modelship.contract.manifest import Artifact
from modelship.export.formats.pt2 import AOTI, FORMAT
from modelship.export.formats.pt2.program import load_aoti, load_program
from modelship.export.formats.registry import register_artifact_runner
from modelship.parity import TorchRunner
from modelship.parity.runner_protocol import Runner


def load(path: Path, artifact: Artifact, isolated: bool) -> Runner:
    return TorchRunner((load_program if artifact.format == FORMAT else load_aoti)(path), artifact.io, artifact.name)


register_artifact_runner(FORMAT, load)
register_artifact_runner(AOTI, load)
