"""`export_loaded` (export/loaded.py), the one way the CLI and every bench suite export a loaded model: what the load
knows reaches the export folder. The checkpoint's sidecar lands as checkpoint.json with the load report, its
preprocessing in the manifest (a given spec winning over it), and a text model's tokenizer beside the artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from text_folders import save_classifier

from modelship.checkpoint import LoadOptions, load_model, sidecar_path
from modelship.contract.artifacts import SIDECAR_FILE
from modelship.contract.manifest import Manifest, sha256_file
from modelship.contract.opsets import OnnxExporter
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.loaded import export_loaded
from modelship.export.spec import ExportSpec
from tests.checkpoint_factory import TinyNet, realistic, save_form

TINY = "tests.checkpoint_factory:make_tinynet"
OWN = PreprocessSpec(resize=18, crop=16)  # the checkpoint's own, from its <ckpt>.json sidecar
LABELS = ["cat", "dog", "bird"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = save_form(tmp_path_factory.mktemp("ckpt") / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")
    sidecar_path(path).write_text(json.dumps({"preprocess": OWN.to_dict(), "labels": LABELS}))
    return path


def _export(checkpoint: Path, out: Path, preprocess: PreprocessSpec | None = None) -> Manifest:
    loaded = load_model(LoadOptions(checkpoint, arch=TINY))
    spec = ExportSpec(out / "tiny", formats=("torchscript",), input_options=("x:batch,3,16,16",))
    result = export_loaded(loaded, spec, preprocess=preprocess)
    assert result.folder == out / "tiny"
    return result.manifest


def test_the_sidecar_and_the_checkpoints_preprocessing_reach_the_export(checkpoint: Path, tmp_path: Path) -> None:
    manifest = _export(checkpoint, tmp_path)
    folder = tmp_path / "tiny"
    sidecar = json.loads((folder / SIDECAR_FILE).read_text())
    assert sidecar["checkpoint"] == str(checkpoint) and sidecar["sha256"] == sha256_file(checkpoint)
    assert (sidecar["arch"], sidecar["arch_source"]) == (TINY, "flag")
    assert sidecar["metadata"]["labels"] == LABELS
    assert PreprocessSpec.from_dict(sidecar["metadata"]["preprocess"]) == OWN
    assert sidecar["load_report"]["ok"] and sidecar["load_report"]["sha256"] == sidecar["sha256"]
    assert (manifest.source.checkpoint, manifest.source.sha256, manifest.source.arch) == (
        str(checkpoint),
        sidecar["sha256"],
        TINY,
    )
    assert manifest.preprocess == OWN
    assert Manifest.read(folder).preprocess == OWN


def test_a_given_preprocessing_wins_over_the_checkpoints(checkpoint: Path, tmp_path: Path) -> None:
    given = PreprocessSpec(resize=16, crop=16, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    assert _export(checkpoint, tmp_path, given).preprocess == given


@pytest.mark.slow
def test_a_text_models_tokenizer_reaches_the_export(tmp_path: Path) -> None:
    folder = save_classifier(tmp_path / "sentiment")
    loaded = load_model(LoadOptions(folder))
    assert loaded.tokenizer is not None
    # the legacy exporter takes a third of dynamo's time here; which one writes the graph is beside the point
    spec = ExportSpec(tmp_path / "out" / "sentiment", formats=("onnx",), exporter=OnnxExporter.LEGACY)
    result = export_loaded(loaded, spec)
    assert result.manifest.tokenizer is not None
    tokenizer = result.folder / result.manifest.tokenizer.file
    assert sha256_file(tokenizer) == sha256_file(loaded.tokenizer.path)
    assert (result.folder / SIDECAR_FILE).is_file()
