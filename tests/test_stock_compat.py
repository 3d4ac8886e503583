"""Every published artifact runs in the runtime the stock Triton container embeds, with the same outputs as here.

ONNX Runtime (the target's version, 1.19.2 for Triton 24.10) runs in `make test`; PyTorch for the LibTorch backend
(2.5 for 24.10, a multi-GB CUDA build) runs in `make compat`, which sets MODELSHIP_STOCK_TORCH=1. Each installs
into its own cached virtual environment (tests/stock_runtime.py), like perf_analyzer's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from serve_exports import write_export

from modelship.contract.manifest import Manifest
from modelship.contract.opsets import runtime_target
from modelship.export.formats.torchscript.jit import load_torchscript
from modelship.parity import input_sets, make_session
from modelship.serve.publish import publish_export
from modelship.testing.realistic import make_realistic
from tests.cli_contract import invoke
from tests.stock_runtime import run_stock, stock_python

pytestmark = pytest.mark.slow
TARGET = runtime_target()
RUNTIMES = {"onnxruntime": ("onnxruntime", TARGET.onnxruntime), "torch": ("torch", TARGET.libtorch)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """Tiny exports of every artifact kind, plus a real export-model product (dynamo ONNX at the target opset,
    fp16 with float32 I/O, scripted TorchScript with its fp16 wrapper)."""
    root = tmp_path_factory.mktemp("stock")
    repo = root / "repo"
    publish_export(write_export(root / "tiny"), repo)
    publish_export(
        write_export(root / "tiny32", "tiny32", fp16_io=False), repo, artifacts=["onnx_fp16", "torchscript_fp16"]
    )
    torch.manual_seed(0)
    model = make_realistic(torchvision.models.resnet18(num_classes=10), torch.randn(4, 3, 64, 64))
    ckpt = root / "r18.pt"
    torch.save(model.state_dict(), ckpt)
    args = ["export", ckpt, "--arch", "resnet18", "--arch-kwargs", '{"num_classes": 10}', "--fp16"]
    args += ["--input", "image:batch,3,64,64", "--out", root / "exports", "--publish", repo, "--json"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return repo


def published(repo: Path, suffix: str) -> list[Path]:
    return sorted(repo.glob(f"*/*/model{suffix}"))


def project_outputs(path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    if path.suffix == ".onnx":
        session = make_session(path)
        return session.run(None, {i.name: a for i, a in zip(session.get_inputs(), inputs, strict=True)})
    module = load_torchscript(path)
    with torch.inference_mode():
        result = module(*[torch.from_numpy(a) for a in inputs])
    return [result.numpy()] if isinstance(result, torch.Tensor) else [t.numpy() for t in result]


@pytest.mark.parametrize(
    "runtime",
    [
        "onnxruntime",
        pytest.param(
            "torch",
            marks=pytest.mark.skipif(
                not os.environ.get("MODELSHIP_STOCK_TORCH"), reason="PyTorch 2.5 is a multi-GB install: make compat"
            ),
        ),
    ],
)
def test_published_artifacts_run_in_the_stock_runtime(repo: Path, runtime: str, report_figure) -> None:
    package, version = RUNTIMES[runtime]
    python = stock_python(package, version)
    files = published(repo, ".onnx" if runtime == "onnxruntime" else ".pt")
    assert len(files) >= 5
    worst = 0.0
    for path in files:
        art = Manifest.from_dict(json.loads((path.parent / "modelship.json").read_text())).artifacts[0]
        for batch in input_sets(art.io, [1, 5], seed=3):
            inputs = [batch[t.name].astype(t.dtype) for t in art.io.inputs]
            stock = run_stock(python, runtime, path, inputs)
            ours = project_outputs(path, inputs)
            assert len(stock) == len(ours), path
            atol = 2e-2 if art.precision == "fp16" else 1e-4
            for a, b in zip(stock, ours, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape, (path, a.dtype, b.dtype)
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=1e-3)
                worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()))
    report_figure(
        f"{len(files)} published {path.suffix} files run in {package} {version} (Triton {TARGET.container}): "
        f"max abs difference to the project's runtime {worst:.1e} at batch 1 and 5"
    )
