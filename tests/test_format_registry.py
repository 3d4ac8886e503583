"""Adding a format is one package of registry entries (export.formats): a toy "legacy_onnx" format (the
TorchScript-based ONNX exporter, written to model.legacy.onnx) is registered entirely from inside this test, with its
flag, its file name, its exporter and its runner, and then goes the way users go: export-model writes and verifies
it, records it in the manifest with its figures, and `modelship parity` judges it again from the folder."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from modelship.contract.artifact_details import ArtifactDetails
from modelship.contract.artifacts import (
    ARTIFACT_FORMATS,
    EXPORT_FILES,
    EXPORT_FORMATS,
    ExportFormat,
    register_artifact_format,
    register_export_format,
)
from modelship.contract.manifest import Artifact, Manifest, Source
from modelship.export.build import Build, BuiltArtifact, Started, Written
from modelship.export.formats.exporters import export_formats
from modelship.export.formats.registry import (
    ARTIFACT_RUNNERS,
    FORMATS,
    FormatExporter,
    register_artifact_runner,
    register_format,
)
from modelship.export.run import run_export
from modelship.export.spec import ExportSpec
from modelship.parity import OnnxRuntimeRunner
from tests.checkpoint_factory import make_tinynet, realistic
from tests.cli_contract import invoke

NAME = "legacy_onnx"


def start(build: Build) -> list[Started]:
    """Export with the TorchScript-based exporter, then verify against eager like every format."""
    path = build.path(NAME)
    inputs, outputs = [t.name for t in build.io.inputs], [t.name for t in build.io.outputs]
    with build.steps(f"export {NAME}", NAME), warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
        torch.onnx.export(build.model, build.example, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes={n: {0: "batch"} for n in inputs + outputs}, dynamo=False)  # fmt: skip
    runner = OnnxRuntimeRunner(path, build.io, name=NAME, isolated=False)
    report = build.verify(NAME, runner, "fp32")
    runner.close()
    built = BuiltArtifact(NAME, NAME, "fp32", build.io, report, ArtifactDetails())
    return [Started(Written(NAME, NAME, build.io, built.details), lambda: built)]


def load(path: Path, artifact: Artifact, isolated: bool) -> OnnxRuntimeRunner:
    return OnnxRuntimeRunner(path, artifact.io, name=artifact.name, isolated=isolated)


@pytest.fixture(scope="module")
def legacy_onnx() -> Iterator[str]:
    """The toy format's registry entries, added here and removed afterwards."""
    register_export_format(ExportFormat(NAME, "legacy ONNX", "Export ONNX with the TorchScript-based exporter."))
    register_artifact_format(NAME, {NAME: "model.legacy.onnx"})
    register_format(FormatExporter(NAME, start, order=5))
    register_artifact_runner(NAME, load)
    yield NAME
    FORMATS.pop(NAME)
    EXPORT_FORMATS.pop(NAME)
    ARTIFACT_FORMATS.pop(NAME)
    EXPORT_FILES.pop(NAME)
    ARTIFACT_RUNNERS.pop(NAME)


@pytest.fixture(scope="module")
def export(legacy_onnx: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, _ = realistic(make_tinynet())
    spec = ExportSpec(out_dir=tmp_path_factory.mktemp("exports") / "tiny", formats=(legacy_onnx, "onnx"))
    source = Source(checkpoint="memory", sha256="0" * 64, arch="tests.checkpoint_factory:make_tinynet")
    return run_export(model, spec, source=source).folder


def test_a_registered_format_is_exported_verified_and_recorded(export: Path) -> None:
    assert NAME in export_formats()
    manifest = Manifest.read(export)
    assert [a.name for a in manifest.artifacts] == ["onnx", NAME]  # the order files were registered in
    artifact = manifest.artifact(NAME)
    assert artifact.format == NAME and artifact.file == "model.legacy.onnx" and (export / artifact.file).is_file()
    assert artifact.parity is not None and artifact.parity.passed
    assert artifact.details.bytes == (export / artifact.file).stat().st_size
    assert [t.step for t in manifest.timings if t.artifact == NAME] == [f"export {NAME}", f"verify {NAME}"]


def test_parity_judges_a_registered_format_from_the_folder(export: Path) -> None:
    result = invoke("parity", export, "--against", "golden", "--artifact", NAME, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and [r["candidate"] for r in report["reports"]] == [NAME]


def test_an_unknown_format_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(Exception, match=r"unknown export format\(s\): toy \(use torchscript, onnx, pt2"):
        ExportSpec(out_dir=Path("unused"), formats=("toy",))


def test_the_contract_alone_knows_the_built_in_formats() -> None:
    """A manifest reads back in a process that imports nothing above the contract (a user's script): the built-in
    formats' artifacts are the contract's own registrations, not a side effect of importing export/formats."""
    import subprocess
    import sys

    probe = "from modelship.contract.artifacts import ARTIFACT_FORMATS; import sys; "
    probe += "print(list(ARTIFACT_FORMATS), 'modelship.export' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert shown == "['torchscript', 'onnx', 'pt2', 'aoti'] False", shown
