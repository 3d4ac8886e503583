"""The export folder's own files, written into the staging folder once every artifact passed: the golden data (the
verification inputs and eager's outputs), a text model's tokenizer, the checkpoint's sidecar, and manifest.json
recording all of it, typed (contract.manifest)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from modelship import __version__
from modelship.contract.artifacts import GOLDEN_FILE, SIDECAR_FILE
from modelship.contract.manifest import ExportFile, Manifest, sha256_file
from modelship.contract.tokenizer import TokenizerSource
from modelship.export.assemble import Made
from modelship.export.build import Verification, Workspace
from modelship.export.labels import default_labels
from modelship.export.plan import ExportPlan
from modelship.parity import save_golden


def write_export_files(plan: ExportPlan, verification: Verification, made: Made, workspace: Workspace) -> Manifest:
    """Golden data, tokenizer, sidecar and manifest written into the staging folder; the manifest."""
    staging, given, io, task = workspace.staging, plan.given, plan.io, plan.task
    save_golden(staging / GOLDEN_FILE, verification.inputs, verification.outputs)
    files = [copy_tokenizer(given.tokenizer, staging)] if given.tokenizer is not None else []
    files += [ExportFile("golden", name, sha256_file(staging / name)) for name in made.files]
    if given.sidecar is not None:
        (staging / SIDECAR_FILE).write_text(json.dumps(given.sidecar, indent=2, default=str) + "\n")
    labels = given.metadata.labels or default_labels(given.source.arch, io.outputs[0])
    manifest = Manifest(
        name=plan.spec.name,
        source=given.source,
        io=io,
        artifacts=made.artifacts,
        task=task.name,
        preprocess=given.preprocess,
        labels=labels if task.labels else None,
        tokenizer=given.tokenizer.spec if given.tokenizer is not None else None,
        files=files,
        score_threshold=plan.spec.score_threshold,
        golden=GOLDEN_FILE,
        timings=list(workspace.steps.timings),
        declined=made.declined,
        tool_version=__version__,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    manifest.write(staging)
    return manifest


def copy_tokenizer(tokenizer: TokenizerSource, staging: Path) -> ExportFile:
    """The tokenizer copied into the export, recorded with the sha256 of the copy (publish and parity check it)."""
    target = staging / tokenizer.spec.file
    shutil.copyfile(tokenizer.path, target)
    return ExportFile("tokenizer", tokenizer.spec.file, sha256_file(target))
