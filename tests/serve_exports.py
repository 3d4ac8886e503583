"""Tiny export folders for the publish/serve/client tests, made by `export-model` as a user makes them.

Every artifact kind a publisher can meet: ONNX fp32, ONNX fp16 with fp16 or fp32 I/O, TorchScript fp32 and fp16,
and a two-output TorchScript model (the OUTPUT__0/OUTPUT__1 mapping), each with real parity figures and golden
data. `tiny_model(cls, seed)` rebuilds the eager model an export was made from, for comparisons.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from click.testing import CliRunner
from torch import nn

from modelship.cli.main import main
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.preprocessing import PreprocessSpec
from modelship.testing.checkpoints import save_form

SIZE = 16
CLASSES = 5
PREPROCESS = PreprocessSpec(resize=SIZE, crop=SIZE, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
LABELS = [f"class_{i}" for i in range(CLASSES)]


class TinyNet(nn.Module):
    """Conv -> ReLU -> pool -> linear: a 5-class image classifier with a dynamic batch."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(image)).mean(dim=(2, 3)))


class TwoHeads(TinyNet):
    """Returns (logits, features): two outputs, for the LibTorch OUTPUT__i mapping."""

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.relu(self.conv(image)).mean(dim=(2, 3))
        return self.head(features), features


def io_spec(dtype: str = "float32", outputs: tuple[tuple[str, int], ...] = (("logits", CLASSES),)) -> IOSpec:
    return IOSpec(
        (TensorSpec("image", ("batch", 3, SIZE, SIZE), dtype),),
        tuple(TensorSpec(name, ("batch", width), dtype) for name, width in outputs),
    )


def tiny_model(cls: type[nn.Module] = TinyNet, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return cls().eval()


# Every export is made once per test session, by `export-model` itself, and copied where a test wants it.
_BUILT = Path(tempfile.mkdtemp(prefix="modelship-test-exports-"))
atexit.register(shutil.rmtree, _BUILT, ignore_errors=True)


def write_export(
    folder: Path, name: str = "tiny", *, fp16_io: bool = True, two_heads: bool = False, seed: int = 0
) -> Path:
    """An export folder made by `export-model --fp16` from a training checkpoint of TinyNet (or TwoHeads) with
    `seed`'s weights, its I/O, preprocessing and labels in the checkpoint's metadata. Artifacts: onnx, onnx_fp16,
    torchscript, torchscript_fp16; the fp16 ones take and return float16 (`--fp16-io`), or with `fp16_io=False`
    float32 around an fp16 model. `two_heads`: TorchScript only."""
    built = _BUILT / f"{name}-{'io16' if fp16_io else 'io32'}-{'heads' if two_heads else 'one'}-{seed}"
    if not (built / name).exists():  # export-model writes it whole or not at all
        _export(built, name, fp16_io=fp16_io, two_heads=two_heads, seed=seed)
    shutil.copytree(built / name, folder)
    return folder


def _export(root: Path, name: str, *, fp16_io: bool, two_heads: bool, seed: int) -> None:
    root.mkdir(exist_ok=True)
    cls = TwoHeads if two_heads else TinyNet
    outputs = (("logits", CLASSES), ("features", 8)) if two_heads else (("logits", CLASSES),)
    metadata = {"io": io_spec("float32", outputs).to_dict(), "preprocess": PREPROCESS.to_dict(), "labels": LABELS}
    checkpoint = save_form(root / f"{name}.pt", tiny_model(cls, seed).state_dict(), "training", **metadata)
    args = [checkpoint, "--arch", f"serve_exports:{cls.__name__}", "--out", root, "--name", name, "--fp16"]
    args += ["--fp16-io"] if fp16_io else []
    result = CliRunner().invoke(main, ["export", *map(str, args), *(["--torchscript"] if two_heads else [])])
    assert result.exit_code == 0, result.output + repr(result.exception)


def eager(model: nn.Module, batch: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    with torch.inference_mode():
        result = model(torch.from_numpy(batch.astype(np.float32)))
    if isinstance(result, tuple):
        return tuple(r.numpy() for r in result)
    return result.numpy()
