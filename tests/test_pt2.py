"""`--pt2`: torch.export's ExportedProgram and an AOTInductor package, verified by the same parity gate at two batch
sizes, recorded in the manifest, re-checked by `modelship parity`, and left out of publishing for Triton 24.10."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.cli_contract import expect_failure, invoke
from tests.fp16_nets import Layers
from tests.test_export_pipeline import TinyEncoder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pt2")
    torch.manual_seed(0)
    torch.save(Layers().state_dict(), root / "layers.pt")
    args = ["export", root / "layers.pt", "--arch", "tests.fp16_nets:Layers", "--input", "x:batch,3,16,16", "--pt2"]
    result = invoke(*args, "--onnx", "--out", root / "exports", "--json")
    assert result.exit_code == 0, result.output
    return root / "exports" / "layers"


def test_pt2_artifacts_are_verified_and_recorded(exported: Path) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    artifacts = {a["name"]: a for a in manifest["artifacts"]}
    assert {"pt2", "aoti"} <= set(artifacts)
    for name, file in (("pt2", "model.pt2"), ("aoti", "model.aoti.pt2")):
        assert artifacts[name]["file"] == file and artifacts[name]["parity"]["passed"]
        assert artifacts[name]["parity"]["batch_sizes"][:2] == [1, 7]


def test_parity_reruns_pt2_artifacts_in_process(exported: Path, tmp_path: Path) -> None:
    args = ["parity", exported, "--arch", "tests.fp16_nets:Layers", "--report", tmp_path / "p.json", "--json"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert {r["candidate"] for r in json.loads(result.stdout)["reports"]} == {"pt2", "aoti", "onnx"}


def test_publish_leaves_pt2_out_for_triton_2_51(exported: Path, tmp_path: Path) -> None:
    result = invoke("publish", exported, "--repo", tmp_path / "repo", "--json")
    assert [m["name"] for m in json.loads(result.stdout)["models"]] == ["layers_onnx"]
    expect_failure(
        ["publish", exported, "--repo", tmp_path / "repo2", "--artifact", "aoti"],
        names=["'aoti'", "Triton 2.51.0", "torch_aoti"],
        untouched=[tmp_path / "repo2"],
    )


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.linear(x).sum() > 0:  # a branch on the data: torch.export cannot capture it without torch.cond
            return x * 2
        return x


def make_data_dependent() -> nn.Module:
    return DataDependent()


def test_what_torch_export_rejects_is_named(tmp_path: Path) -> None:
    torch.save(DataDependent().state_dict(), tmp_path / "dd.pt")
    args = ["export", tmp_path / "dd.pt", "--arch", "tests.test_pt2:make_data_dependent", "--input", "x:batch,4"]
    names = ["torch.export rejected the model", "test_pt2.py:", "if self.linear(x).sum() > 0"]
    payload = expect_failure([*args, "--pt2", "--out", tmp_path / "out"], names=names)
    assert "export without --pt2" in payload["error"]


@pytest.mark.heavy
@pytest.mark.parametrize("arch", ["resnet50", "timm/vit_tiny_patch16_224", "encoder"])
def test_pt2_on_large_models(tmp_path: Path, arch: str, report_figure) -> None:
    from modelship.contract.manifest import Source
    from modelship.export.run import run_export
    from modelship.export.spec import ExportSpec
    from modelship.testing.realistic import make_realistic

    torch.manual_seed(0)
    inputs: tuple[str, ...] = ()
    if arch == "encoder":
        model = TinyEncoder().eval()
        inputs = ("input_ids:batch,sequence=12:int64:0..100", "attention_mask:batch,sequence:int64:0..2")
    elif arch.startswith("timm/"):
        import timm

        model = make_realistic(
            timm.create_model(arch.removeprefix("timm/"), pretrained=False), torch.randn(2, 3, 224, 224)
        )
    else:
        import torchvision

        model = make_realistic(torchvision.models.get_model(arch), torch.randn(2, 3, 224, 224))
    spec = ExportSpec(out_dir=tmp_path / "m", formats=("pt2",), input_options=inputs)
    result = run_export(model, spec, source=Source(checkpoint="memory", sha256="0" * 64, arch=arch))
    for name in ("pt2", "aoti"):
        assert result.reports[name].passed, result.reports[name].failures()
    seconds = {t.step: round(t.seconds, 1) for t in result.timings if t.artifact in ("pt2", "aoti")}
    report_figure(f"--pt2 {arch}: {seconds}")
