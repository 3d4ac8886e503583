"""How `--explain` answers for an INT8 variant: INT8 changes every module's output by design, so no module is "the
first that differs"; the explanation is what the export's search tried and the closest it came."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from modelship.contract.artifact_details import Int8Details, Int8Try
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Artifact
from modelship.contract.tensors import Tensors
from modelship.parity.localize import Explanation


def explain_onnx_int8(folder: Path, artifact: Artifact, model: nn.Module, io: IOSpec, inputs: Tensors) -> Explanation:
    """The closest of the INT8 tries the manifest records, and the tries no other beats on accuracy and speed."""
    details = artifact.details
    tries = details.tries if isinstance(details, Int8Details) else []
    if not tries:
        return Explanation(artifact.name, None, 0, ["INT8 is judged by the task's answer, not localised by module"])
    closest = min(tries, key=Int8Try.closeness)
    reached = f"{closest.recipe}: {', '.join(closest.failures) or 'passes'}"
    lines = [f"closest of {len(tries)} quantizations: {reached}"]
    front = details.pareto() if isinstance(details, Int8Details) else []
    lines += [f"accuracy against speed, the best tried: {t.point()}: {t.recipe}" for t in front]
    return Explanation(artifact.name, None, 0, lines)
