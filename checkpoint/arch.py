"""Architecture names and model construction, by model family (`checkpoint.families`): torchvision names,
`timm/NAME`, and `package.module:Factory`.

Canonical names: torchvision's registry name ("resnet50"), "timm/<name>", or the import path as given.
"""

from __future__ import annotations

import contextlib
import difflib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from modelship.checkpoint.families import families, family_of
from modelship.contract.errors import ArchitectureError
from modelship.contract.json_object import JsonObject

# Keyword arguments a data file (checkpoint metadata, sidecar, manifest) may pass to a registry factory: plain
# hyper-parameters of torchvision's and timm's classifiers. Factory arguments that fetch or read files (weights,
# pretrained, pretrained_cfg_overlay, checkpoint_path, cache_dir, ...) or take callables are flag-only.
FILE_ARCH_KWARGS = frozenset(
    {
        "num_classes",
        "dropout",
        "attention_dropout",
        "aux_logits",
        "transform_input",
        "init_weights",
        "stochastic_depth_prob",
        "width_mult",
        "zero_init_residual",
        "groups",
        "width_per_group",
        "image_size",
        "in_chans",
        "global_pool",
        "drop_rate",
        "drop_path_rate",
        "attn_drop_rate",
        "proj_drop_rate",
        "img_size",
        "class_token",
        "aux_loss",
    }
)
_PLAIN = (str, int, float, bool, type(None))


def canonical_arch(name: str) -> str:
    """Validate `name` and return its canonical spelling (its model family's); unknown names raise with close
    matches."""
    name = name.strip()
    for family in families():
        own = family.canonical(name)
        if own is not None:
            return own
    known = [arch for family in families() for arch in family.known()]
    raise _unknown(name, known)


def is_registry_arch(arch: str) -> bool:
    """A name whose family builds it from the name alone (torchvision, timm): its default class count is known."""
    return family_of(arch).registry


def check_data_arch(arch: Any, arch_kwargs: Any, *, file: str, field: str = "arch", trust: bool = False) -> None:
    """Refuse what a data file may not ask for: an import path (`pkg.module:Factory`) or arch_kwargs other than
    plain JSON values of FILE_ARCH_KWARGS. Nothing is imported here. `trust` (--trust-checkpoint) lifts both."""
    kwargs_field = f"{field.rpartition('arch')[0]}arch_kwargs"
    if not isinstance(arch, str):
        raise ArchitectureError(
            f"{file}: field {field!r} must be a string naming an architecture, not {type(arch).__name__}",
            hint="fix the file, or pass --arch NAME",
        )
    if trust:
        return
    if ":" in arch:
        raise ArchitectureError(
            f"{file}: field {field!r} names the import path {arch!r}; files may name only registry architectures "
            "(torchvision names or timm/NAME), never code to import",
            hint=f"if you trust that code, pass --arch {arch} on the command line",
            details={"refused": field, "file": file},
        )
    if arch_kwargs is None:
        return
    if not isinstance(arch_kwargs, dict):
        raise ArchitectureError(
            f"{file}: field {kwargs_field!r} must be a JSON object, not {type(arch_kwargs).__name__}",
            hint="fix the file, or pass --arch-kwargs JSON",
        )
    for key, value in arch_kwargs.items():
        plain = isinstance(value, _PLAIN) or (isinstance(value, list) and all(isinstance(v, _PLAIN) for v in value))
        if key not in FILE_ARCH_KWARGS or not plain:
            why = "is not a plain JSON value" if key in FILE_ARCH_KWARGS else "is not a plain hyper-parameter"
            raise ArchitectureError(
                f"{file}: field {kwargs_field!r} entry {key!r} {why} a file may pass to a registry factory",
                hint=f"if you mean it, pass --arch {arch} --arch-kwargs JSON on the command line",
                details={"refused": f"{kwargs_field}.{key}", "file": file},
            )


def _unknown(name: str, choices: list[str]) -> ArchitectureError:
    close = difflib.get_close_matches(name, choices, n=4, cutoff=0.6)
    return ArchitectureError(
        f"unknown architecture {name!r}" + (f"; did you mean {', '.join(close)}?" if close else ""),
        hint="use a torchvision name (resnet50), timm/NAME (timm/vit_tiny_patch16_224) or package.module:Factory",
    )


def factory(arch: str) -> Callable[..., nn.Module]:
    """The callable that builds `arch` (already canonical) from keyword arguments: its model family's."""
    family = family_of(arch)
    if family.build is None:
        raise ArchitectureError(
            f"{arch}: {family.name} models are built from their checkpoint folder, not from a name",
            hint="pass the folder itself",
        )
    return family.build(arch)


def build_model(arch: str, arch_kwargs: JsonObject | None = None) -> nn.Module:
    """A real float32 CPU model in eval mode, randomly initialised."""
    kwargs = dict(arch_kwargs or {})
    try:
        with warnings.catch_warnings():
            # torchvision warns that googlenet/inception init will change; irrelevant: weights are loaded next
            warnings.filterwarnings("ignore", message="The default weight initialization", category=FutureWarning)
            model = factory(arch)(**kwargs)
    except ArchitectureError:
        raise
    except Exception as exc:  # the factory is user or library code; any failure means these kwargs do not build it
        raise ArchitectureError(
            f"could not build {arch} with arch_kwargs {kwargs} ({type(exc).__name__}: {exc})",
            hint="check --arch-kwargs against the factory's signature",
        ) from exc
    if not isinstance(model, nn.Module):
        raise ArchitectureError(f"{arch} returned a {type(model).__name__}, not a torch.nn.Module")
    return model.float().eval()


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Move every parameter to the meta device as it is registered (for models whose __init__ computes with
    tensors, which the meta device context cannot run, e.g. torchvision's RegNet)."""
    original = nn.Module.register_parameter

    def register(self: nn.Module, name: str, param: nn.Parameter | None) -> None:
        original(self, name, param)
        if param is not None:
            self._parameters[name] = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    nn.Module.register_parameter = register  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.register_parameter = original  # type: ignore[method-assign]


def build_on_meta(arch: str, arch_kwargs: JsonObject | None = None) -> nn.Module:
    """The model's structure without allocating weights (shapes and key names only)."""
    try:
        with torch.device("meta"):
            return build_model(arch, arch_kwargs)
    except ArchitectureError:
        with _parameters_on_meta():
            return build_model(arch, arch_kwargs)
