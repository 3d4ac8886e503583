"""Checkpoint files in every form the loader accepts (plain state_dict, training dict, EMA, Lightning,
safetensors, legacy zip-less), written from a state_dict: what tests, the parity zoo and benchmarks load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file


def prefixed(state_dict: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + key: value for key, value in state_dict.items()}


def save_form(path: Path, state_dict: dict[str, torch.Tensor], form: str, **extra: Any) -> Path:
    """Write `state_dict` in one of FORMS; `extra` entries go beside the weights (torch forms only)."""
    FORMS[form](path, dict(state_dict), extra)
    return path


def _bare(path: Path, sd: dict, extra: dict) -> None:
    torch.save({**sd, **extra}, path)


def _training(path: Path, sd: dict, extra: dict) -> None:
    optimizer = {"state": {0: {"momentum_buffer": torch.zeros(3)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    torch.save({"epoch": 7, "state_dict": sd, "optimizer": optimizer, **extra}, path)


def _ema(path: Path, sd: dict, extra: dict) -> None:
    raw = {k: v + 1.0 if v.is_floating_point() else v for k, v in sd.items()}  # the raw weights differ from EMA
    torch.save({"epoch": 7, "state_dict": raw, "state_dict_ema": sd, "optimizer": {}, **extra}, path)


def _lightning(path: Path, sd: dict, extra: dict) -> None:
    torch.save(
        {
            "epoch": 3,
            "global_step": 300,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": prefixed(sd, "model."),
            "optimizer_states": [{}],
            "lr_schedulers": [],
            "hyper_parameters": {"lr": 0.01, **extra.pop("hyper_parameters", {})},
            **extra,
        },
        path,
    )


def _safetensors(path: Path, sd: dict, extra: dict) -> None:
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path), metadata={k: str(v) for k, v in extra.items()})


def _legacy(path: Path, sd: dict, extra: dict) -> None:
    torch.save({**sd, **extra}, path, _use_new_zipfile_serialization=False)


FORMS: dict[str, Callable[[Path, dict, dict], None]] = {
    "bare": _bare,
    "training": _training,
    "ema": _ema,
    "lightning": _lightning,
    "safetensors": _safetensors,
    "legacy": _legacy,
}
