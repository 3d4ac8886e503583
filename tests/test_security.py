"""Data files never run code: payloads through checkpoint metadata, the sidecar, the manifest, pickles and labels.

Each payload would create a marker file if anything imported or called what the file names; every test proves the
marker never appears and that the command refuses with one line naming the file and the field.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from modelship.checkpoint import write_sidecar
from tests.checkpoint_factory import TinyNet, realistic, save_form
from tests.cli_contract import expect_failure, invoke

TINY = "tests.checkpoint_factory:make_tinynet"


def payload(marker: Path) -> dict:
    return {"arch": "subprocess:getoutput", "arch_kwargs": {"cmd": f"touch {marker}"}}


@pytest.fixture
def weights() -> dict[str, torch.Tensor]:
    return realistic(TinyNet())[0].state_dict()


class Pickled:
    """Unpickling this calls `touch marker`: what a malicious whole-model pickle does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.getoutput, (f"touch {self.marker}",))


@pytest.mark.parametrize("form", ["bare", "training", "safetensors"])
@pytest.mark.parametrize("command", ["inspect", "export"])
def test_import_path_in_checkpoint_metadata_is_refused(tmp_path, weights, form, command) -> None:
    marker = tmp_path / "MARK"
    extra = payload(marker)
    if form == "safetensors":
        extra = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in extra.items()}
    ckpt = save_form(tmp_path / ("m.safetensors" if form == "safetensors" else "m.pt"), weights, form, **extra)
    args = [command, ckpt] + (["--out", tmp_path / "out"] if command == "export" else [])
    expect_failure(args, names=[str(ckpt), "'arch'", "subprocess:getoutput", "--arch"], untouched=[tmp_path])
    assert not marker.exists()


def test_import_path_in_lightning_hyper_parameters_is_refused(tmp_path, weights) -> None:
    marker = tmp_path / "MARK"
    ckpt = save_form(tmp_path / "last.ckpt", weights, "lightning", hyper_parameters=payload(marker))
    expect_failure(["inspect", ckpt], names=["subprocess:getoutput"], untouched=[tmp_path])
    assert not marker.exists()


def test_import_path_in_timm_train_args_is_refused(tmp_path, weights) -> None:
    marker = tmp_path / "MARK"
    ckpt = save_form(tmp_path / "m.pth.tar", weights, "training", args={"model": "x:y", "num_classes": 3})
    expect_failure(["inspect", ckpt], names=["'arch'", "timm/x:y"], untouched=[tmp_path])
    assert not marker.exists()


def test_import_path_in_sidecar_is_refused(tmp_path, weights) -> None:
    marker = tmp_path / "MARK"
    ckpt = save_form(tmp_path / "m.pt", weights, "bare")
    sidecar = write_sidecar(ckpt, **payload(marker))
    expect_failure(
        ["inspect", ckpt], names=[str(sidecar), "'arch'", "--arch subprocess:getoutput"], untouched=[tmp_path]
    )
    assert not marker.exists()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights": "IMAGENET1K_V1"},  # would download
        {"num_classes": {"__class__": "x"}},  # not a plain value
        {"norm_layer": "torch.nn.Identity"},  # a callable, by name
        {"progress": True},
    ],
)
def test_registry_kwargs_from_a_file_are_limited(tmp_path, kwargs) -> None:
    import torchvision

    ckpt = save_form(tmp_path / "r.pt", torchvision.models.resnet18().state_dict(), "bare")
    write_sidecar(ckpt, "resnet18", kwargs)
    expect_failure(["inspect", ckpt], names=["'arch_kwargs'", next(iter(kwargs))], untouched=[tmp_path])


def test_the_command_line_may_name_code(tmp_path, weights) -> None:
    ckpt = save_form(tmp_path / "m.pt", weights, "bare")
    write_sidecar(ckpt, "subprocess:getoutput", {"cmd": "true"})
    result = invoke("inspect", ckpt, "--arch", TINY, "--json")  # the flag wins; the sidecar's arch is not used
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["arch"] == TINY


def test_pickled_code_is_refused(tmp_path, weights) -> None:
    marker = tmp_path / "MARK"
    ckpt = tmp_path / "evil.pt"
    torch.save({"state_dict": weights, "hook": Pickled(marker)}, ckpt)
    expect_failure(
        ["inspect", ckpt], names=[str(ckpt), "refusing to unpickle", "--trust-checkpoint"], untouched=[tmp_path]
    )
    expect_failure(["export", ckpt, "--out", tmp_path / "out"], names=["refusing to unpickle"], untouched=[tmp_path])
    assert not marker.exists()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """A verified export made with the command-line --arch (an import path), its checkpoint beside it."""
    root = tmp_path_factory.mktemp("sec")
    ckpt = save_form(root / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")
    result = invoke(
        "export", ckpt, "--arch", TINY, "--onnx", "--input", "x:batch,3,16,16", "--out", root / "exports", "--json"
    )
    assert result.exit_code == 0, result.output
    return root / "exports" / "tiny"


def test_manifest_import_path_needs_the_flag(exported, tmp_path) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["source"]["arch"] == TINY
    expect_failure(["parity", exported], names=["source.arch", TINY, f"--arch {TINY}"], untouched=[exported])
    result = invoke("parity", exported, "--arch", TINY, "--report", tmp_path / "p.json", "--json")
    assert result.exit_code == 0, result.output


def test_manifest_payload_is_refused_before_anything_is_built(exported, tmp_path) -> None:
    marker = tmp_path / "MARK"
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for path in exported.iterdir():
        (tampered / path.name).write_bytes(path.read_bytes())
    manifest = json.loads((tampered / "manifest.json").read_text())
    manifest["source"].update(arch="subprocess:getoutput", arch_kwargs={"cmd": f"touch {marker}"})
    (tampered / "manifest.json").write_text(json.dumps(manifest))
    expect_failure(["parity", tampered], names=["manifest.json", "source.arch", "subprocess:getoutput"])
    assert not marker.exists()


def test_parity_checks_the_checkpoint_hash_before_building(exported, tmp_path) -> None:
    ckpt = tmp_path / "other.pt"
    save_form(ckpt, realistic(TinyNet(), seed=3)[0].state_dict(), "bare")
    expect_failure(
        ["parity", exported, "--arch", TINY, "--checkpoint", ckpt, "--report", tmp_path / "p.json"],
        names=["differs from the one exported"],
    )


def test_labels_with_line_breaks_become_one_line_each(tmp_path, weights) -> None:
    labels = ["cat", "dog\nwolf", "bird\r\nfish"]
    ckpt = save_form(tmp_path / "m.pt", weights, "bare", labels=labels)
    out = tmp_path / "exports"
    result = invoke("export", ckpt, "--arch", TINY, "--onnx", "--input", "x:batch,3,16,16", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "m" / "manifest.json").read_text())
    assert manifest["labels"] == ["cat", "dog wolf", "bird fish"]
    repo = tmp_path / "repo"
    manifest["labels"] = ["a\nb", "c", "d"]  # a manifest edited by hand: publish normalises too
    (out / "m" / "manifest.json").write_text(json.dumps(manifest))
    assert invoke("publish", out / "m", "--repo", repo, "--json").exit_code == 0
    assert (repo / "m_onnx" / "labels.txt").read_text().splitlines() == ["a b", "c", "d"]
