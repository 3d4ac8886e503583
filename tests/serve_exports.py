"""Tiny export folders for the publish/serve/client tests, written the way export-model writes them.

Every artifact kind a publisher can meet: ONNX fp32, ONNX fp16 with fp16 or fp32 I/O, TorchScript fp32 and fp16,
and a two-output TorchScript model (the OUTPUT__0/OUTPUT__1 mapping). `tiny_model(cls, seed)` rebuilds the eager
model an export was made from, for comparisons.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.manifest import Artifact, Manifest, Source
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.fp16 import convert_onnx_fp16, half_with_float_io

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


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tiny_model(cls: type[nn.Module] = TinyNet, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return cls().eval()


def _onnx(model: nn.Module, path: Path, io: IOSpec) -> None:
    example = torch.randn(1, 3, SIZE, SIZE)
    names = [t.name for t in io.outputs]
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", (DeprecationWarning, FutureWarning)
        )  # the legacy exporter: fast and enough for a tiny net
        torch.onnx.export(
            model,
            (example,),
            str(path),
            input_names=["image"],
            output_names=names,
            dynamic_axes={n: {0: "batch"} for n in ["image", *names]},
            dynamo=False,
        )


def _fp16(source: Path, target: Path, keep_io_types: bool) -> None:
    onnx.save(convert_onnx_fp16(onnx.load(str(source)), keep_io_types=keep_io_types), str(target))


def _script(model: nn.Module, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
        torch.jit.save(torch.jit.script(model), str(path))


def write_export(
    folder: Path, name: str = "tiny", *, fp16_io: bool = True, two_heads: bool = False, seed: int = 0
) -> Path:
    """An export folder as export-model writes it. Artifacts: onnx, onnx_fp16, torchscript, torchscript_fp16; the
    fp16 ones take and return float16 (`--fp16-io`), or with `fp16_io=False` float32 around an fp16 model.
    `two_heads`: TorchScript only."""
    folder.mkdir(parents=True, exist_ok=True)
    model = tiny_model(TwoHeads if two_heads else TinyNet, seed)
    outputs = (("logits", CLASSES), ("features", 8)) if two_heads else (("logits", CLASSES),)
    io32, io16 = io_spec("float32", outputs), io_spec("float16", outputs)
    artifacts = []
    if not two_heads:
        _onnx(model, folder / "model.onnx", io32)
        _fp16(folder / "model.onnx", folder / "model.fp16.onnx", keep_io_types=not fp16_io)
        artifacts += [
            ("onnx", "onnx", "fp32", "model.onnx", io32),
            ("onnx_fp16", "onnx", "fp16", "model.fp16.onnx", io16 if fp16_io else io32),
        ]
    _script(model, folder / "model.pt")
    artifacts.append(("torchscript", "torchscript", "fp32", "model.pt", io32))
    example = (torch.randn(2, 3, SIZE, SIZE),)
    half = model.half() if fp16_io else half_with_float_io(model, io32, example)
    _script(half, folder / "model.fp16.pt")
    artifacts.append(("torchscript_fp16", "torchscript", "fp16", "model.fp16.pt", io16 if fp16_io else io32))
    Manifest(
        name=name,
        source=Source(checkpoint="tiny.pt", sha256="0" * 64, arch="tests.serve_exports:TinyNet"),
        io=io32,
        artifacts=[Artifact(n, fmt, prec, file, sha256(folder / file), io) for n, fmt, prec, file, io in artifacts],
        preprocess=PREPROCESS,
        labels=LABELS,
    ).write(folder)
    return folder


def eager(model: nn.Module, batch: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    with torch.inference_mode():
        result = model(torch.from_numpy(batch.astype(np.float32)))
    if isinstance(result, tuple):
        return tuple(r.numpy() for r in result)
    return result.numpy()
