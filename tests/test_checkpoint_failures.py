"""Checkpoints that must be refused, each with a verdict that names the problem and the fix."""

from __future__ import annotations

import io
import json

import pytest
import torch
import torchvision

from modelship.checkpoint import LoadOptions, load_model
from modelship.contract.errors import ArchitectureError, CheckpointError, KeyMappingError, UsageError
from tests.checkpoint_factory import make_tinynet, outputs, realistic, save_form, signature_cache

pytestmark = pytest.mark.usefixtures(signature_cache.__name__)

TINY = "tests.checkpoint_factory:make_tinynet"


@pytest.fixture(scope="module")
def resnet_sd():
    return torchvision.models.resnet18(num_classes=10).state_dict()


class Payload:
    """Unpickling this creates a file: the proof that a checkpoint ran code."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_malicious_pickle_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}, "payload": Payload(marker)}, path)
    with pytest.raises(CheckpointError, match="refusing to unpickle") as info:
        load_model(LoadOptions(path, arch=TINY))
    assert "--trust-checkpoint" in str(info.value)
    assert info.value.details["unsafe_globals"] == [f"{io.open.__module__}.open"]  # "_io.open" on 3.12
    assert not marker.exists()


def test_pickled_module_refused_then_trusted(tmp_path):
    model, example = realistic(make_tinynet())
    path = tmp_path / "whole.pt"
    torch.save(model, path)
    with pytest.raises(CheckpointError, match="whole pickled model") as info:
        load_model(LoadOptions(path))
    assert "--trust-checkpoint" in str(info.value)
    loaded = load_model(LoadOptions(path, trust_checkpoint=True))
    assert loaded.arch == "tests.checkpoint_factory:TinyNet"
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))
    rebuilt = load_model(LoadOptions(path, trust_checkpoint=True, arch=TINY))
    assert torch.equal(outputs(rebuilt.model, example), outputs(model, example))


def test_head_stripped_fingerprint_says_how(tmp_path, resnet_sd):
    body = {k: v for k, v in resnet_sd.items() if not k.startswith("fc.")}
    path = save_form(tmp_path / "body.pt", body, "bare")
    with pytest.raises(ArchitectureError, match="no classifier head") as info:
        load_model(LoadOptions(path))
    assert "--arch resnet18 --allow-missing 'fc.*'" in info.value.hint
    with pytest.raises(KeyMappingError, match="2 missing keys") as info:
        load_model(LoadOptions(path, arch="resnet18"))
    assert info.value.details["missing_keys"] == ["fc.weight", "fc.bias"]
    loaded = load_model(LoadOptions(path, arch="resnet18", allow_missing=("fc.*",)))
    assert loaded.report.allowed_missing == ("fc.weight", "fc.bias")


def test_the_head_size_is_read_off_the_weights(tmp_path, resnet_sd):
    path = save_form(tmp_path / "ten.pt", resnet_sd, "bare")
    loaded = load_model(LoadOptions(path, arch="resnet18"))  # --arch without --arch-kwargs: the head says 10
    assert loaded.arch_kwargs == {"num_classes": 10}
    assert "num_classes=10 inferred from the head's weights (fc.weight, fc.bias)" in loaded.report.notes


def test_ten_classes_into_an_explicit_thousand(tmp_path, resnet_sd):
    path = save_form(tmp_path / "ten.pt", resnet_sd, "bare")
    with pytest.raises(KeyMappingError, match="shape mismatches") as info:
        load_model(LoadOptions(path, arch="resnet18", arch_kwargs={"num_classes": 1000}))
    assert info.value.details["shape_mismatches"][0] == {
        "key": "fc.weight",
        "checkpoint": [10, 512],
        "model": [1000, 512],
    }
    assert '"num_classes": 10' in info.value.hint


def test_nan_weights_named(tmp_path, resnet_sd):
    sd = dict(resnet_sd)
    sd["layer2.0.conv1.weight"] = sd["layer2.0.conv1.weight"].clone()
    sd["layer2.0.conv1.weight"][0, 0, 0, 0] = float("nan")
    sd["fc.bias"] = torch.full_like(sd["fc.bias"], float("inf"))
    with pytest.raises(CheckpointError, match="NaN or Inf in 2 tensors") as info:
        load_model(LoadOptions(save_form(tmp_path / "nan.pt", sd, "bare")))
    assert info.value.details["nonfinite"] == ["layer2.0.conv1.weight", "fc.bias"]


@pytest.mark.parametrize("form", ["bare", "legacy", "safetensors"])
def test_truncated_file(tmp_path, resnet_sd, form):
    path = save_form(tmp_path / ("m.safetensors" if form == "safetensors" else "m.pt"), resnet_sd, form)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated") as info:
        load_model(LoadOptions(path, arch="resnet18"))
    assert str(path) in info.value.message


@pytest.mark.parametrize(
    ("content", "match"), [(b"", "empty"), (b"hello, not a checkpoint\n", "not a PyTorch checkpoint")]
)
def test_not_a_checkpoint(tmp_path, content, match):
    path = tmp_path / "x.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=match):
        load_model(LoadOptions(path))


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_model(LoadOptions(tmp_path / "nope.pt"))


def test_unknown_arch_suggests(tmp_path, resnet_sd):
    path = save_form(tmp_path / "m.pt", resnet_sd, "bare")
    with pytest.raises(ArchitectureError, match="did you mean resnet18"):
        load_model(LoadOptions(path, arch="resnet_18"))
    with pytest.raises(ArchitectureError, match="cannot import"):
        load_model(LoadOptions(path, arch="no_such_pkg.mod:Net"))


def test_no_usual_key_needs_state_key(tmp_path, resnet_sd):
    path = tmp_path / "odd.pt"
    torch.save({"weights": {"inner": resnet_sd}, "epoch": 1}, path)
    with pytest.raises(CheckpointError, match="--state-key"):
        load_model(LoadOptions(path))
    with pytest.raises(UsageError, match="no entry 'wrong'"):
        load_model(LoadOptions(path, state_key="wrong"))
    loaded = load_model(LoadOptions(path, state_key="weights.inner", arch="resnet18", arch_kwargs={"num_classes": 10}))
    assert loaded.report.state_key == "weights.inner"


def test_rename_suggested_then_fixed_by_key_map(tmp_path):
    model, example = realistic(make_tinynet())
    sd = {k.replace("fc1.", "fc_1."): v for k, v in model.state_dict().items()}
    sd["embeddings.position_ids"] = torch.arange(4)
    path = save_form(tmp_path / "renamed.pt", sd, "training")
    with pytest.raises(KeyMappingError) as info:
        load_model(LoadOptions(path, arch=TINY))
    details = info.value.details
    assert details["suggestions"][0]["rule"] == {"regex": [{"pattern": "^fc_1\\.", "replace": "fc1."}]}
    assert sorted(details["unexpected_keys"]) == ["embeddings.position_ids", "fc_1.bias", "fc_1.weight"]
    key_map = tmp_path / "map.json"
    key_map.write_text(json.dumps({"drop": ["embeddings.position_ids"], **details["suggestions"][0]["rule"]}))
    loaded = load_model(LoadOptions(path, arch=TINY, key_map=key_map))
    assert loaded.report.renamed == {"fc_1.weight": "fc1.weight", "fc_1.bias": "fc1.bias"}
    assert loaded.report.dropped == ("embeddings.position_ids",)
    assert torch.equal(outputs(loaded.model, example), outputs(model, example))


def test_allow_unexpected_is_reported(tmp_path):
    model, _ = realistic(make_tinynet())
    sd = {**model.state_dict(), "aux.weight": torch.ones(2)}
    loaded = load_model(LoadOptions(save_form(tmp_path / "a.pt", sd, "bare"), arch=TINY, allow_unexpected=("aux.*",)))
    assert loaded.report.allowed_unexpected == ("aux.weight",)


def test_bad_key_map_file(tmp_path):
    model, _ = realistic(make_tinynet())
    path = save_form(tmp_path / "a.pt", model.state_dict(), "bare")
    bad = tmp_path / "map.toml"
    bad.write_text("rename = [oops")
    with pytest.raises(UsageError, match=r"map\.toml: not valid toml"):
        load_model(LoadOptions(path, arch=TINY, key_map=bad))
    bad.write_text('renames = {a = "b"}')
    with pytest.raises(UsageError, match="unknown fields"):
        load_model(LoadOptions(path, arch=TINY, key_map=bad))


def test_failure_details_carry_partial_report(tmp_path, resnet_sd):
    path = save_form(tmp_path / "ten.pt", resnet_sd, "training")
    with pytest.raises(KeyMappingError) as info:
        load_model(LoadOptions(path, arch="resnet18", arch_kwargs={"num_classes": 1000}))
    details = info.value.details
    assert details["ok"] is False and details["state_key"] == "state_dict" and details["arch"] == "resnet18"
    assert details["error"] == str(info.value)
