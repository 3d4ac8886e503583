"""Every checkpoint form loads, resolves its architecture and rebuilds a model with the original's outputs."""

from __future__ import annotations

import pytest
import torch
import torchvision

from modelship.checkpoint import LoadOptions, load_model, write_sidecar
from modelship.contract.preprocessing import PreprocessSpec
from tests.checkpoint_factory import FORMS, outputs, prefixed, realistic, save_form, signature_cache

pytestmark = pytest.mark.usefixtures(signature_cache.__name__)


@pytest.fixture(scope="module")
def resnet():
    model, example = realistic(torchvision.models.resnet18(num_classes=10))
    return model, example, outputs(model, example)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_rebuilds_identical_model(tmp_path, resnet, form):
    model, example, expected = resnet
    suffix = {"safetensors": ".safetensors", "lightning": ".ckpt", "legacy": ".pth.tar"}.get(form, ".pt")
    path = save_form(tmp_path / f"model{suffix}", model.state_dict(), form)
    loaded = load_model(LoadOptions(path, arch="resnet18", arch_kwargs={"num_classes": 10}))
    assert loaded.report.ok
    assert torch.equal(outputs(loaded.model, example), expected)
    expected_key = {"bare": None, "legacy": None, "safetensors": None, "ema": "state_dict_ema"}.get(form, "state_dict")
    assert loaded.report.state_key == expected_key
    assert loaded.report.ema == (form == "ema")
    if form == "ema":
        assert any("EMA" in note and "--state-key state_dict" in note for note in loaded.report.notes)
    if form == "lightning":
        assert loaded.report.stripped_prefixes == {"model.": 122}


def test_state_key_overrides_ema(tmp_path, resnet):
    model, example, expected = resnet
    path = save_form(tmp_path / "ema.pt", model.state_dict(), "ema")
    loaded = load_model(LoadOptions(path, arch="resnet18", arch_kwargs={"num_classes": 10}, state_key="state_dict"))
    assert not loaded.report.ema
    assert not torch.equal(outputs(loaded.model, example), expected)  # the raw (non-EMA) weights


@pytest.mark.parametrize("prefix", ["module.", "_orig_mod.", "module._orig_mod.", "_orig_mod.module.", "model.module."])
def test_wrapper_prefixes_in_any_order(tmp_path, resnet, prefix):
    model, example, expected = resnet
    path = save_form(tmp_path / "w.pt", prefixed(model.state_dict(), prefix), "training")
    loaded = load_model(LoadOptions(path))  # fingerprint sees through the prefixes too
    assert (loaded.arch, loaded.arch_kwargs, loaded.arch_source) == ("resnet18", {"num_classes": 10}, "fingerprint")
    assert loaded.report.stripped_prefixes == {prefix: 122}
    assert torch.equal(outputs(loaded.model, example), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_weights_load_as_float32(tmp_path, resnet, dtype):
    model, example, _ = resnet
    low = {k: v.to(dtype) if v.is_floating_point() else v for k, v in model.state_dict().items()}
    path = save_form(tmp_path / "half.pt", low, "bare")
    loaded = load_model(LoadOptions(path, arch="resnet18", arch_kwargs={"num_classes": 10}))
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    reference = torchvision.models.resnet18(num_classes=10)
    reference.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in low.items()})
    assert torch.equal(outputs(loaded.model, example), outputs(reference.eval(), example))
    assert any("converted to float32" in note for note in loaded.report.notes)


def test_metadata_in_checkpoint_and_passthrough(tmp_path, resnet):
    model, example, expected = resnet
    extra = {"arch": "resnet18", "arch_kwargs": {"num_classes": 10}, "labels": [f"c{i}" for i in range(10)]}
    path = save_form(tmp_path / "meta.pt", model.state_dict(), "training", **extra)
    loaded = load_model(LoadOptions(path))
    assert loaded.arch_source == "checkpoint"
    assert loaded.metadata.to_dict() == {"labels": extra["labels"]}
    assert torch.equal(outputs(loaded.model, example), expected)


def test_safetensors_header_metadata(tmp_path, resnet):
    model, example, expected = resnet
    path = save_form(
        tmp_path / "m.safetensors",
        model.state_dict(),
        "safetensors",
        arch="resnet18",
        arch_kwargs='{"num_classes": 10}',
    )
    loaded = load_model(LoadOptions(path))
    assert (loaded.arch_source, loaded.arch_kwargs) == ("checkpoint", {"num_classes": 10})
    assert torch.equal(outputs(loaded.model, example), expected)


def test_sidecar(tmp_path):
    model, example = realistic(torchvision.models.mobilenet_v3_small(num_classes=5))
    path = save_form(tmp_path / "m.pth", model.state_dict(), "bare")
    write_sidecar(path, "mobilenet_v3_small", {"num_classes": 5}, preprocess={"resize": 256})
    loaded = load_model(LoadOptions(path))
    assert (loaded.arch, loaded.arch_source, loaded.preprocess) == (
        "mobilenet_v3_small",
        "sidecar",
        PreprocessSpec(resize=256),
    )
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


def test_fingerprint_mobilenet_default_head(tmp_path):
    model, example = realistic(torchvision.models.mobilenet_v3_small())
    loaded = load_model(LoadOptions(save_form(tmp_path / "m.pt", model.state_dict(), "bare")))
    assert (loaded.arch, loaded.arch_kwargs, loaded.arch_source) == ("mobilenet_v3_small", {}, "fingerprint")
    assert "num_classes=1000" in loaded.report.arch_detail
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


@pytest.mark.parametrize(("name", "size"), [("resnet18", 64), ("convnext_atto", 64), ("vit_tiny_patch16_224", 224)])
def test_timm_lightning_checkpoint_with_flag(tmp_path, name, size):
    import timm

    model, example = realistic(timm.create_model(name, pretrained=False, num_classes=7), size=size)
    path = save_form(tmp_path / "t.ckpt", model.state_dict(), "lightning")
    loaded = load_model(LoadOptions(path, arch=f"timm/{name}", arch_kwargs={"num_classes": 7}))
    assert loaded.report.ok and loaded.arch == f"timm/{name}"
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


def test_timm_train_args_name_the_arch(tmp_path):
    import argparse

    import timm

    model, example = realistic(timm.create_model("convnext_atto", pretrained=False, num_classes=4))
    args = argparse.Namespace(model="convnext_atto", num_classes=4, lr=0.1)
    path = save_form(tmp_path / "last.pth.tar", model.state_dict(), "ema", arch="convnext", args=args)
    loaded = load_model(LoadOptions(path))
    assert (loaded.arch, loaded.arch_kwargs, loaded.arch_source) == (
        "timm/convnext_atto",
        {"num_classes": 4},
        "checkpoint",
    )
    assert any("ignored 'arch' stored in the checkpoint" in n for n in loaded.report.notes)
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


def test_custom_factory_and_own_model_prefix(tmp_path, monkeypatch):
    from tests.checkpoint_factory import Wrapped

    model, example = realistic(Wrapped())
    path = save_form(tmp_path / "w.pt", prefixed(model.state_dict(), "module."), "bare")
    loaded = load_model(LoadOptions(path, arch="tests.checkpoint_factory:Wrapped"))
    assert loaded.report.stripped_prefixes == {"module.": len(model.state_dict())}
    assert all(key.startswith("model.") for key in loaded.model.state_dict())
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


def test_custom_factory_function_with_kwargs(tmp_path):
    from tests.checkpoint_factory import make_tinynet

    model, example = realistic(make_tinynet(num_classes=5, width=4))
    path = save_form(tmp_path / "t.pt", model.state_dict(), "training")
    options = LoadOptions(
        path, arch="tests.checkpoint_factory:make_tinynet", arch_kwargs={"num_classes": 5, "width": 4}
    )
    loaded = load_model(options)
    assert loaded.arch_source == "flag"
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))
