"""End-to-end exports on in-memory models: TorchScript + ONNX, fp32 + fp16, verified at batch 1 and 7."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from modelship.contract.errors import ExportError, ParityError
from modelship.contract.manifest import Manifest, Source
from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.export.precision.fp16.options import Fp16Options
from modelship.export.run import run_export
from modelship.export.spec import ExportSpec
from modelship.parity import OnnxRuntimeRunner, load_golden
from modelship.testing.realistic import make_realistic

SOURCE = Source(checkpoint="in-memory", sha256="0" * 64, arch="test")
ALL = ("torchscript", "torchscript_fp16", "onnx", "onnx_fp16")


class EncoderOutput(NamedTuple):
    logits: torch.Tensor
    hidden: torch.Tensor


class TinyEncoder(nn.Module):
    """Two int64 inputs with a dynamic sequence axis; masked single-head self-attention; named-tuple output."""

    def __init__(self, vocab: int = 100, dim: int = 32, classes: int = 5, max_len: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> EncoderOutput:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.embed(input_ids) + self.position(positions).unsqueeze(0)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / (q.shape[-1] ** 0.5)
        scores = scores.masked_fill(attention_mask.unsqueeze(1) == 0, float("-inf"))
        hidden = self.norm(x + scores.softmax(dim=-1) @ v)
        keep = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * keep).sum(dim=1) / keep.sum(dim=1)
        return EncoderOutput(self.head(pooled), hidden)


class DictNet(nn.Module):
    """A small CNN whose forward returns a dict of two tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8, 10)

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.features(image)
        return {"logits": self.head(features.mean(dim=(2, 3))), "features": features}


def export(model: nn.Module, folder: Path, **kwargs) -> Manifest:
    result = run_export(model, ExportSpec(out_dir=folder, precisions=("fp16",), **kwargs), source=SOURCE)
    manifest = Manifest.read(folder)
    assert [a.name for a in manifest.artifacts] == list(ALL)
    for artifact in manifest.artifacts:
        assert artifact.parity.passed, (artifact.name, artifact.parity)
        assert artifact.parity.batch_sizes[:2] == [1, 7]
        assert (folder / artifact.file).is_file() and artifact.details.seconds
    assert result.folder == folder and not list(folder.parent.glob(".*staging"))
    assert {t.step.split()[0] for t in manifest.timings} >= {"script", "export", "convert", "verify"}
    inputs, outputs = load_golden(folder / manifest.golden)
    assert len(inputs) == len(outputs) >= 2
    fp32 = onnx.load(str(folder / "model.onnx"))
    assert fp32.ir_version <= 10 and fp32.opset_import[0].version <= 21
    props = {p.key: p.value for p in fp32.metadata_props}
    assert json.loads(props["modelship.io"]) == manifest.io.to_dict()
    for value in (*fp32.graph.input, *fp32.graph.output):
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch"
    return manifest


def realistic(model: nn.Module, shape=(4, 3, 224, 224)) -> nn.Module:
    torch.manual_seed(0)
    return make_realistic(model, torch.randn(shape))


@pytest.mark.slow
def test_resnet18_exports_and_verifies(tmp_path):
    import torchvision

    manifest = export(realistic(torchvision.models.resnet18()), tmp_path / "resnet18")
    assert manifest.io.to_dict()["inputs"] == [{"name": "x", "shape": ["batch", 3, 224, 224], "dtype": "float32"}]
    onnx_fp16 = manifest.artifact("onnx_fp16")
    assert onnx_fp16.io.inputs[0].dtype == "float32" and onnx_fp16.details.kept_fp32_ops == []
    ts_fp16 = manifest.artifact("torchscript_fp16")  # float32 I/O like fp16 ONNX: the casts are inside
    assert ts_fp16.io.inputs[0].dtype == ts_fp16.io.outputs[0].dtype == "float32"
    scripted = load_torchscript(tmp_path / "resnet18" / ts_fp16.file)
    assert scripted(torch.randn(2, 3, 224, 224)).dtype == torch.float32


@pytest.mark.slow
def test_mobilenet_v3_small_with_fp16_io(tmp_path):
    import torchvision

    manifest = export(
        realistic(torchvision.models.mobilenet_v3_small()), tmp_path / "mnv3", options=(Fp16Options(io=True),)
    )
    art = manifest.artifact("onnx_fp16")
    assert art.io.inputs[0].dtype == "float16" and art.io.outputs[0].dtype == "float16"
    graph = onnx.load(str(tmp_path / "mnv3" / art.file)).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    ts_fp16 = manifest.artifact("torchscript_fp16")  # --fp16-io switches both formats
    assert ts_fp16.io.inputs[0].dtype == ts_fp16.io.outputs[0].dtype == "float16"


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_two_int64_inputs_with_dynamic_sequence(tmp_path, exporter):
    folder = tmp_path / exporter
    manifest = export(
        TinyEncoder().eval(),
        folder,
        exporter=exporter,
        input_options=("input_ids:batch,sequence=12:int64:0..100", "attention_mask:batch,sequence:int64:0..2"),
    )
    io = manifest.io.to_dict()
    assert [t["dtype"] for t in io["inputs"]] == ["int64", "int64"]
    assert {t["name"]: t["shape"] for t in io["outputs"]} == {
        "logits": ["batch", 5],
        "hidden": ["batch", "sequence", 32],
    }
    labels = [b.label for b in manifest.artifact("onnx").parity.per_batch]
    assert labels == ["batch 1", "batch 7", "batch 7, sequence 9"]
    runner = OnnxRuntimeRunner(folder / "model.onnx", manifest.io)
    ids = np.random.default_rng(0).integers(0, 100, (3, 40))
    outputs = runner.run({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert outputs["hidden"].shape == (3, 40, 32)


def test_dict_outputs(tmp_path):
    manifest = export(realistic(DictNet(), (4, 3, 32, 32)), tmp_path / "dictnet", dynamic=("height", "width"))
    assert {t.name: t.shape for t in manifest.io.outputs} == {
        "logits": ("batch", 10),
        "features": ("batch", 8, "height", "width"),
    }


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([t * 2 for t in x.unbind(0) for _ in range(1)])


def test_script_failure_names_trace_and_leaves_nothing(tmp_path):
    with pytest.raises(ExportError, match="--trace") as info:
        run_export(
            DataDependent(),
            ExportSpec(out_dir=tmp_path / "m", formats=("torchscript",), input_options=("x:batch,4",)),
            source=SOURCE,
        )
    assert "generator" in str(info.value) and "test_export_pipeline.py:" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_existing_export_is_refused_without_force_and_replaced_with_it(tmp_path):
    model = DictNet().eval()
    spec = dict(formats=("onnx",), dynamic=(), input_options=("image:batch,3,16,16",))
    first = run_export(model, ExportSpec(out_dir=tmp_path / "m", **spec), source=SOURCE)
    with pytest.raises(ExportError, match=r"already exists.*--force"):
        run_export(model, ExportSpec(out_dir=tmp_path / "m", **spec), source=SOURCE)
    (tmp_path / "m" / "stale.txt").write_text("from an older export")
    second = run_export(model, ExportSpec(out_dir=tmp_path / "m", force=True, **spec), source=SOURCE)
    assert second.manifest.created >= first.manifest.created
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    assert not (tmp_path / "m" / "stale.txt").exists()


def test_failed_verification_leaves_no_folder(tmp_path):
    strict = {"fp16": {"atol": 0.0, "rtol": 0.0}}
    with pytest.raises(ParityError, match="onnx_fp16") as info:
        run_export(
            DictNet().eval(),
            ExportSpec(
                out_dir=tmp_path / "m",
                formats=("onnx",),
                precisions=("fp16",),
                tolerances=strict,
                input_options=("image:batch,3,8,8",),
            ),
            source=SOURCE,
        )
    assert info.value.details["failed"] == ["onnx_fp16"]
    attempts = info.value.details["artifacts"]["onnx_fp16"]
    assert attempts["passed"] is False
    assert list(tmp_path.iterdir()) == []


def test_trace_is_used_only_when_asked_and_checked_at_other_batches(tmp_path):
    manifest = run_export(
        DictNet().eval(),
        ExportSpec(out_dir=tmp_path / "m", formats=("torchscript",), trace=True, input_options=("image:batch,3,8,8",)),
        source=SOURCE,
    ).manifest
    art = manifest.artifact("torchscript")
    assert art.details.method == "trace" and art.parity.batch_sizes == [1, 7]


# Scripted TorchScript and its fp16 variant of the large classifiers. Their ONNX and ONNX fp16 are the full parity
# zoo's (tv_efficientnet_b0, tv_convnext_tiny, tv_vit_b_16, tv_swin_t: the CLI, then parity on photos too), and
# resnet50's everything is the zoo's (tv_resnet50) and resnet18's above.
HEAVY = ["efficientnet_b0", "convnext_tiny", "vit_b_16", "swin_t"]


@pytest.mark.heavy
@pytest.mark.parametrize("arch", HEAVY)
def test_heavy_torchvision_models_script(tmp_path, arch, report_figure):
    import torchvision

    model = realistic(torchvision.models.get_model(arch, weights=None))
    spec = ExportSpec(out_dir=tmp_path / arch, formats=("torchscript",), precisions=("fp16",))
    run_export(model, spec, source=SOURCE)
    manifest = Manifest.read(tmp_path / arch)
    report_figure(
        f"export {arch} seconds per step: " + ", ".join(f"{t.step} {t.seconds:.1f}" for t in manifest.timings)
    )
    assert [a.name for a in manifest.artifacts] == ["torchscript", "torchscript_fp16"]
    assert all(a.parity.passed and a.details.method == "script" for a in manifest.artifacts), manifest.artifacts
