"""Recognising architectures from key names and shapes, across the whole torchvision classification registry."""

from __future__ import annotations

import time

import pytest

from modelship.checkpoint.arch import build_on_meta
from modelship.checkpoint.families.torchvision_models import models as torchvision_models
from modelship.checkpoint.fingerprint import fingerprint
from modelship.checkpoint.resolve import resolve_arch
from modelship.contract.errors import ArchitectureError
from tests.checkpoint_factory import signature_cache

pytestmark = pytest.mark.usefixtures(signature_cache.__name__)


def shapes_of(arch: str, **kwargs) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in build_on_meta(arch, kwargs).state_dict().items()}


def resolve(shapes):
    return resolve_arch(
        flag=None,
        flag_kwargs=None,
        checkpoint_meta={},
        sidecar_meta={},
        record=None,
        shapes=shapes,
        checkpoint_name="ckpt.pt",
    )


def test_meta_build_allocates_nothing():
    model = build_on_meta("regnet_y_128gf")  # its __init__ computes with tensors: the fallback path
    assert all(p.is_meta for p in model.parameters())


def test_resnet18_prefers_torchvision_and_names_timm_twins():
    choice = resolve(shapes_of("resnet18", num_classes=10))
    assert (choice.arch, choice.arch_kwargs, choice.source) == ("resnet18", {"num_classes": 10}, "fingerprint")
    assert "timm/resnetblur18" in choice.notes[0]


def test_unrecognised_says_what_to_pass():
    with pytest.raises(ArchitectureError, match="not recognised") as info:
        resolve({"my.layer.weight": (3, 3)})
    assert "--arch" in info.value.hint


@pytest.mark.slow
def test_every_torchvision_classification_model_is_recognised(report_figure):
    names = torchvision_models("classification")
    assert len(names) >= 80
    start = time.perf_counter()
    wrong = {}
    for name in names:
        choice = resolve(shapes_of(name, num_classes=10))
        if (choice.arch, choice.arch_kwargs) != (name, {"num_classes": 10}):
            wrong[name] = choice.arch
    assert wrong == {}
    report_figure(
        f"fingerprint: recognised {len(names)} torchvision models in {time.perf_counter() - start:.1f} s "
        "(incl. building their state_dict shapes)"
    )


@pytest.mark.slow
def test_timm_convnext_by_fingerprint():
    result = fingerprint(shapes_of("timm/convnext_atto", num_classes=7))
    assert [(m.arch, m.arch_kwargs) for m in result.matches] == [("timm/convnext_atto", {"num_classes": 7})]
