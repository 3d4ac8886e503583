"""`export-model` end to end: a plain torchvision state_dict with no other flag becomes a verified ONNX pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from modelship.cli.export import export_command
from modelship.contract.manifest import Manifest
from modelship.testing.realistic import make_realistic


def _checkpoint(folder: Path, arch: str) -> Path:
    import torchvision

    torch.manual_seed(0)
    model = make_realistic(torchvision.models.get_model(arch, weights=None), torch.randn(2, 3, 224, 224))
    path = folder / "ckpt.pt"
    torch.save(model.state_dict(), path)
    return path


def _run(args: list[str]):
    return CliRunner().invoke(export_command, args, catch_exceptions=False)


def _assert_onnx_pair(folder: Path, arch: str) -> Manifest:
    manifest = Manifest.read(folder)
    assert [a.name for a in manifest.artifacts] == ["onnx", "onnx_fp16"]
    assert all(a.parity.passed and a.parity.batch_sizes == [1, 7] for a in manifest.artifacts)
    assert manifest.source.arch == arch and manifest.source.arch_source == "fingerprint"
    assert manifest.preprocess is not None and manifest.preprocess.crop == (224, 224)
    assert (folder / "golden.npz").is_file() and (folder / "checkpoint.json").is_file()
    return manifest


@pytest.mark.slow
def test_plain_resnet18_state_dict_to_verified_onnx_pair_and_publish(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _checkpoint(tmp_path, "resnet18")
    result = _run(["ckpt.pt", "--onnx", "--fp16", "--publish", "repo", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["name"] == "ckpt"
    assert Path(payload["published"]["repo"]).resolve() == (tmp_path / "repo").resolve()
    assert payload["published"]["models"]
    assert payload["timings"][0]["step"] == "load checkpoint"
    _assert_onnx_pair(tmp_path / "exports" / "ckpt", "resnet18")

    again = _run(["ckpt.pt", "--onnx", "--json"])
    assert again.exit_code == 1
    refusal = json.loads(again.stdout)
    assert refusal["ok"] is False and "--force" in refusal["error"]


def test_bad_flags_are_usage_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt.pt").write_bytes(b"")
    result = _run(["ckpt.pt", "--fp16-io", "--json"])
    assert result.exit_code == 2 and "--fp16" in json.loads(result.stdout)["error"]
    result = _run(["ckpt.pt", "--batch-sizes", "1,x"])
    assert result.exit_code == 2 and "comma-separated" in result.output
