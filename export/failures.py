"""An export whose artifacts fail parity stops here: one ParityError naming each failing artifact, what differs, and
where in the network it parts from eager PyTorch (export.explain, on the first input set it failed), with the
tolerance flags that would loosen it. Nothing is written."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from modelship.contract.errors import ParityError
from modelship.contract.iospec import IOSpec
from modelship.contract.manifest import Artifact
from modelship.contract.parity_report import ParityReport
from modelship.contract.precisions import PRECISIONS
from modelship.export.assemble import Made
from modelship.export.build import Verification
from modelship.parity.localize import Explanation

Failing = list[tuple[Artifact, ParityReport, Verification]]


def refuse_failures(made: Made, verification: Verification, folder: Path, model: nn.Module, io: IOSpec) -> None:
    """ParityError when any artifact failed (see the module doc); `folder` holds the artifacts as written."""
    failed = made.failed
    if not failed:
        return
    reports = made.reports
    failing = [(a, reports[a.name], made.judged.get(a.name, verification)) for a in made.artifacts if a.name in failed]
    explained = explain_failures(folder, failing, model, io)
    raise ParityError(
        f"{', '.join(failed)} differ{'s' if len(failed) == 1 else ''} from eager PyTorch beyond tolerance: "
        + "; ".join(
            f"{name}: {', '.join(reports[name].failures()[:2])}"
            + (f" - {explained[name].lines()[0]}" if name in explained else "")
            for name in failed
        ),
        hint=f"see the parity table; loosen with {_loosening(failing)} or a --tolerances file only if the "
        "difference is acceptable",
        details={
            "artifacts": {name: r.to_dict() for name, r in reports.items()},
            "failed": failed,
            "explain": {name: e.to_dict() for name, e in explained.items()},
        },
    )


def explain_failures(folder: Path, failed: Failing, model: nn.Module, io: IOSpec) -> dict[str, Explanation]:
    """Where each failing artifact parts from eager PyTorch (export.explain), on the first input set it failed (of
    the sets it was judged on)."""
    from modelship.export.explain import explain_artifact

    explained = {}
    for artifact, report, verification in failed:
        inputs = verification.inputs[report.first_failed_set()]
        if artifact.io.max_rows:  # a single-row graph (a detector's ONNX) is localised on the set's first row
            inputs = {name: value[: artifact.io.max_rows] for name, value in inputs.items()}
        try:
            explained[artifact.name] = explain_artifact(folder, artifact, model, io, inputs)
        except Exception as exc:  # localisation is a diagnosis: its own failure must not hide the parity verdict
            explained[artifact.name] = Explanation(
                artifact.name, None, 0, [f"could not localise: {type(exc).__name__}: {exc}"]
            )
    return explained


def _loosening(failing: Failing) -> str:
    """The tolerance flags of the failing artifacts' precisions (--atol/--rtol, --int8-atol/--int8-rtol, ...)."""
    flags = dict.fromkeys(PRECISIONS[artifact.precision].tolerance_flag for artifact, _, _ in failing)
    return ", ".join(f"{flag}atol/{flag}rtol" for flag in flags)
