"""The zoo: architectures the suite exports and checks, each saved the way training code saves checkpoints.

Every entry builds a randomly initialised model (no download), makes it realistic (`export.realistic`), saves it
in one checkpoint form (plain state_dict, DDP `module.` prefix, training state, timm EMA, Lightning `.ckpt`,
safetensors) with the architecture named by flag, checkpoint metadata or sidecar, and lists the export-model
arguments. Formats and precisions are chosen to keep `--zoo fast` under 8 minutes and `--zoo full` under 20 on
2 CPU cores: fp16 only as ONNX (fp16 TorchScript runs ~25x slower on CPU), TorchScript fp32 for the small models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from modelship.checkpoint import sidecar_path, write_sidecar
from modelship.contract.preprocessing import ChannelOrder, PreprocessSpec
from modelship.testing.checkpoints import prefixed, save_form
from modelship.testing.realistic import make_realistic

# The custom image model was "trained" with BGR input and its own statistics: its spec lives in the sidecar.
MULTIHEAD_PREPROCESS = PreprocessSpec(
    resize=110, crop=96, mean=(0.45, 0.45, 0.4), std=(0.25, 0.25, 0.3), channel_order=ChannelOrder.BGR
)
TEXT_INPUTS = (
    "--input",
    "input_ids:batch,sequence:int64:0..1000",
    "--input",
    "attention_mask:batch,sequence:int64:0..2",
)


MODELS = f"{__package__}.zoo_models"  # parity_tests.zoo_models here, modelship.parity_tests.zoo_models installed


@dataclass(frozen=True)
class ZooEntry:
    """One architecture: how to build it, how its checkpoint is saved, how it is exported."""

    name: str
    build: Callable[[], torch.nn.Module]
    arch: str  # canonical name, as the loader reports it
    form: str  # bare | ddp | training | ema | lightning | safetensors
    arch_via: str  # flag | checkpoint | sidecar: where export-model learns the architecture
    export_args: tuple[str, ...]
    images: bool = True  # an image model (end-to-end image parity, BatchNorm calibrated on photos); else text
    zoo: str = "fast"
    arch_kwargs: dict[str, Any] = field(default_factory=dict)
    sidecar: dict[str, Any] = field(default_factory=dict)  # extra metadata (preprocess) for the sidecar

    @property
    def id(self) -> str:
        return self.name

    def formats(self) -> str:
        """The artifacts it exports, for the zoo table (e.g. "onnx, onnx_fp16")."""
        names = [a.lstrip("-") for a in self.export_args if a in ("--onnx", "--torchscript")]
        if "--fp16" in self.export_args:
            names += [f"{n}_fp16" for n in list(names)]
        return ", ".join(names)


def _torchvision(name: str, **kwargs: Any) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import torchvision

        return torchvision.models.get_model(name, weights=None, **kwargs)

    return build


def _timm(name: str) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        import timm

        return timm.create_model(name, pretrained=False)

    return build


def _custom(name: str) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        from parity_tests import zoo_models

        return getattr(zoo_models, name)()

    return build


ONNX_TS = ("--onnx", "--torchscript")
ONNX_FP16 = ("--onnx", "--fp16")

ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("tv_resnet18", _torchvision("resnet18"), "resnet18", "bare", "flag", ONNX_TS),
    ZooEntry(
        "tv_mobilenet_v3_small",
        _torchvision("mobilenet_v3_small"),
        "mobilenet_v3_small",
        "ddp",
        "checkpoint",
        ONNX_FP16,
    ),
    ZooEntry("timm_convnext_atto", _timm("convnext_atto"), "timm/convnext_atto", "lightning", "checkpoint", ONNX_TS),
    ZooEntry(
        "timm_vit_tiny",
        _timm("vit_tiny_patch16_224"),
        "timm/vit_tiny_patch16_224",
        "safetensors",
        "checkpoint",
        ("--onnx",),
    ),
    ZooEntry(
        "multihead_dict",
        _custom("MultiHead"),
        f"{MODELS}:MultiHead",
        "training",
        "flag",  # project code: named on the command line, never in a file
        (*ONNX_TS, "--input", "x:batch,3,96,96"),
        sidecar={"preprocess": MULTIHEAD_PREPROCESS.to_dict()},
    ),
    ZooEntry(
        "text_encoder",
        _custom("TextEncoder"),
        f"{MODELS}:TextEncoder",
        "ema",
        "flag",
        (*ONNX_TS, *TEXT_INPUTS),
        images=False,
    ),
    ZooEntry("tv_resnet50", _torchvision("resnet50"), "resnet50", "safetensors", "flag", ONNX_FP16, zoo="full"),
    ZooEntry(
        "tv_efficientnet_b0",
        _torchvision("efficientnet_b0"),
        "efficientnet_b0",
        "ddp",
        "checkpoint",
        ONNX_FP16,
        zoo="full",
    ),
    ZooEntry(
        "tv_convnext_tiny",
        _torchvision("convnext_tiny"),
        "convnext_tiny",
        "lightning",
        "checkpoint",
        ONNX_FP16,
        zoo="full",
    ),
    ZooEntry("tv_vit_b_16", _torchvision("vit_b_16"), "vit_b_16", "bare", "sidecar", ONNX_FP16, zoo="full"),
    ZooEntry("tv_swin_t", _torchvision("swin_t"), "swin_t", "training", "flag", ONNX_FP16, zoo="full"),
    ZooEntry(
        "timm_efficientnet_b0", _timm("efficientnet_b0"), "timm/efficientnet_b0", "bare", "flag", ONNX_FP16, zoo="full"
    ),
)
ZOOS = {"none": (), "fast": tuple(e for e in ZOO if e.zoo == "fast"), "full": ZOO}

SUFFIXES = {"lightning": ".ckpt", "safetensors": ".safetensors"}


def build_checkpoint(entry: ZooEntry, folder: Path, photos: list[Path]) -> Path:
    """Build, make realistic and save `entry`'s model; return the checkpoint path. Image models calibrate their
    BatchNorm statistics on `photos` through their own training transforms (as training on real images would)
    and on as much N(0, 1) noise (what random-input parity feeds): calibrated on noise only, efficientnets answer
    real photos with logits in the thousands; on photos only, noise."""
    torch.manual_seed(0)
    model = entry.build().eval()
    make_realistic(model, _example(entry, model, photos))
    state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
    path = folder / f"{entry.name}{SUFFIXES.get(entry.form, '.pt')}"
    meta = {"arch": entry.arch, "arch_kwargs": entry.arch_kwargs} if entry.arch_via == "checkpoint" else {}
    if entry.form == "ddp":
        save_form(path, prefixed(state_dict, "module."), "bare", **meta)
    elif entry.form == "lightning":
        save_form(path, state_dict, "lightning", hyper_parameters=meta)
    elif entry.form == "safetensors":
        save_form(
            path, state_dict, "safetensors", **{k: v if isinstance(v, str) else _json(v) for k, v in meta.items()}
        )
    else:
        save_form(path, state_dict, entry.form, **meta)
    if entry.arch_via == "sidecar":
        write_sidecar(path, entry.arch, entry.arch_kwargs, **entry.sidecar)
    elif entry.sidecar:
        sidecar_path(path).write_text(_json(entry.sidecar))
    return path


def export_args(entry: ZooEntry, checkpoint: Path, out: Path) -> list[str]:
    """export-model's arguments for `entry` (verified at batch 1 and 4)."""
    args = [str(checkpoint), *entry.export_args, "--batch-sizes", "1,4", "--out", str(out), "--json"]
    if entry.arch_via == "flag":
        args += ["--arch", entry.arch]
    return args


def _example(entry: ZooEntry, model: torch.nn.Module, photos: list[Path]) -> Any:
    if entry.images:
        from modelship.parity.image_inputs import training_transform
        from modelship.preprocess import load_image

        own = entry.sidecar.get("preprocess")
        spec = PreprocessSpec.from_dict(own) if own is not None else None
        transform = training_transform(model, entry.arch, spec, entry.name).transform
        batch = torch.stack([transform(load_image(p)) for p in photos])
        noise = torch.randn(batch.shape, generator=torch.Generator().manual_seed(0))  # what random parity feeds
        return torch.cat([batch, batch.flip(-1), noise])
    ids = torch.randint(0, 1000, (4, 16), generator=torch.Generator().manual_seed(0))
    return ids, torch.ones_like(ids)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
