"""`--arch NAME` reads the build kwargs off the weights as recognition does (a segmenter's num_classes and aux_loss,
a detector's num_classes), --arch-kwargs winning; and `--arch package.module:Factory` wins over a config.json
beside the weights (issue 40)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torchvision.models import detection, segmentation

from modelship.checkpoint import LoadOptions, load_model
from modelship.contract.errors import ArchitectureError, CheckpointError, KeyMappingError
from tests.checkpoint_factory import signature_cache
from tests.cli_contract import invoke

pytestmark = pytest.mark.usefixtures(signature_cache.__name__)

BUILDERS = {**vars(segmentation), **vars(detection)}


def save_state_dict(folder: Path, arch: str, **kwargs: object) -> tuple[Path, dict[str, torch.Tensor]]:
    """A plain state_dict of torchvision's `arch` built offline with `kwargs`, and the state dict itself."""
    torch.manual_seed(0)
    state_dict = BUILDERS[arch](weights=None, weights_backbone=None, **kwargs).state_dict()
    path = folder / f"{arch}.pt"
    torch.save(state_dict, path)
    return path, state_dict


@pytest.fixture(scope="module")
def fcn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor]]:
    return save_state_dict(tmp_path_factory.mktemp("fcn"), "fcn_resnet50", num_classes=5, aux_loss=True)


def test_a_segmenters_head_and_auxiliary_head_are_read_off_the_weights_with_arch(fcn) -> None:
    path, state_dict = fcn
    loaded = load_model(LoadOptions(path, arch="fcn_resnet50"))
    assert (loaded.arch, loaded.arch_kwargs, loaded.arch_source) == (
        "fcn_resnet50",
        {"aux_loss": True, "num_classes": 5},
        "flag",
    )
    notes = loaded.report.notes
    assert "aux_loss=True inferred from the auxiliary head's weights (aux_classifier (8))" in notes, notes
    assert (
        "num_classes=5 inferred from the head's weights (classifier.4.weight, classifier.4.bias, "
        "aux_classifier.4.weight, aux_classifier.4.bias)" in notes
    ), notes
    assert torch.equal(loaded.model.classifier[4].weight, state_dict["classifier.4.weight"])
    assert loaded.model.aux_classifier is None  # dropped unless --keep-aux, as when recognised
    recognised = load_model(LoadOptions(path))
    assert (recognised.arch, recognised.arch_kwargs, recognised.arch_source) == (
        "fcn_resnet50",
        {"aux_loss": True, "num_classes": 5},
        "fingerprint",
    )


def test_a_given_num_classes_wins_and_a_wrong_one_is_refused_naming_the_heads(fcn) -> None:
    path, _ = fcn
    with pytest.raises(KeyMappingError, match="4 shape mismatches") as info:
        load_model(LoadOptions(path, arch="fcn_resnet50", arch_kwargs={"num_classes": 3}))
    details = info.value.details
    assert details["arch_kwargs"] == {"aux_loss": True, "num_classes": 3} and details["unexpected_keys"] == []
    assert info.value.hint == "the head holds 5 classes: pass --arch-kwargs '{\"num_classes\": 5}'"
    kept = load_model(LoadOptions(path, arch="fcn_resnet50", arch_kwargs={"num_classes": 5}, keep_aux=True))
    assert kept.arch_kwargs == {"num_classes": 5, "aux_loss": True}
    assert not any(note.startswith("num_classes=") for note in kept.report.notes)
    with torch.no_grad():
        assert list(kept.model(torch.randn(1, 3, 32, 32))) == ["out", "aux"]


@pytest.mark.parametrize(
    ("arch", "kwargs"),
    [
        ("deeplabv3_mobilenet_v3_large", {"aux_loss": True, "num_classes": 4}),
        ("lraspp_mobilenet_v3_large", {"num_classes": 3}),
        ("ssdlite320_mobilenet_v3_large", {"num_classes": 7}),
        ("fasterrcnn_mobilenet_v3_large_320_fpn", {"num_classes": 3}),
    ],
)
def test_arch_alone_loads_mobilenet_segmenters_and_detectors_with_another_class_count(
    tmp_path: Path, arch: str, kwargs: dict[str, object]
) -> None:
    path, state_dict = save_state_dict(tmp_path, arch, **kwargs)
    loaded = load_model(LoadOptions(path, arch=arch))
    assert (loaded.arch, loaded.arch_kwargs) == (arch, kwargs)
    classes = f"num_classes={kwargs['num_classes']} inferred from the head's weights ("
    assert any(note.startswith(classes) for note in loaded.report.notes), loaded.report.notes
    model = getattr(loaded.model, "detector", loaded.model)
    weights = model.state_dict()
    assert all(torch.equal(weights[key], tensor) for key, tensor in state_dict.items() if key in weights)


def test_a_detectors_hint_names_its_class_count_not_its_channel_count(tmp_path: Path) -> None:
    path, _ = save_state_dict(tmp_path, "ssdlite320_mobilenet_v3_large", num_classes=7)
    with pytest.raises(KeyMappingError) as info:
        load_model(LoadOptions(path, arch="ssdlite320_mobilenet_v3_large", arch_kwargs={"num_classes": 5}))
    assert info.value.details["shape_mismatches"][0]["checkpoint"][0] == 42  # 6 anchors x 7 classes
    assert info.value.hint == "the head holds 7 classes: pass --arch-kwargs '{\"num_classes\": 7}'"
    assert load_model(LoadOptions(path)).arch_kwargs == {"num_classes": 7}  # recognition agrees


def test_twin_detectors_still_need_arch_without_it(tmp_path: Path) -> None:
    path, _ = save_state_dict(tmp_path, "fasterrcnn_mobilenet_v3_large_320_fpn", num_classes=3)
    with pytest.raises(ArchitectureError, match="match 2 architectures") as info:
        load_model(LoadOptions(path))
    message = f"{info.value} {info.value.hint}"
    assert "fasterrcnn_mobilenet_v3_large_fpn" in message and "fasterrcnn_mobilenet_v3_large_320_fpn" in message
    assert "--arch" in info.value.hint


def test_a_factory_with_a_resized_head_still_gets_num_classes_from_the_head(tmp_path: Path) -> None:
    from tests.checkpoint_factory import make_tinynet

    path = tmp_path / "tiny.pt"
    torch.save(make_tinynet(num_classes=6).state_dict(), path)
    loaded = load_model(LoadOptions(path, arch="tests.checkpoint_factory:make_tinynet"))
    assert loaded.arch_kwargs == {"num_classes": 6}
    assert "num_classes=6 inferred from the head's weights (fc2.weight, fc2.bias)" in loaded.report.notes


ENCODER_MODULE = "issue40_encoders"
ENCODER_SOURCE = """
import torch


def build_encoder():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
"""
BERT_CONFIG = {
    "model_type": "bert",
    "architectures": ["BertModel"],
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 100,
}


@pytest.fixture
def encoder_folder(tmp_path: Path) -> Path:
    """A user's folder: a factory module, and weights it built saved beside a Hugging Face config.json."""
    (tmp_path / f"{ENCODER_MODULE}.py").write_text(ENCODER_SOURCE)
    (tmp_path / "config.json").write_text(json.dumps(BERT_CONFIG))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    yield tmp_path
    sys.modules.pop(ENCODER_MODULE, None)


def test_an_import_path_arch_wins_over_a_config_json_beside_the_weights(encoder_folder: Path) -> None:
    factory = f"{ENCODER_MODULE}:build_encoder"
    result = invoke("inspect", encoder_folder / "model.safetensors", "--arch", factory, "--json", cwd=encoder_folder)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["ok"], data["arch"], data["arch_source"]) == (True, factory, "flag")
    assert any("config.json beside the weights is not read" in note for note in data["notes"])
    sys.path.insert(0, str(encoder_folder))
    try:
        loaded = load_model(LoadOptions(encoder_folder / "model.safetensors", arch=factory))
    finally:
        sys.path.remove(str(encoder_folder))
    assert (loaded.arch, loaded.tokenizer) == (factory, None)
    assert loaded.model(torch.zeros(2, 8)).shape == (2, 4)


def test_a_registry_arch_for_a_hugging_face_file_is_still_refused(encoder_folder: Path) -> None:
    with pytest.raises(CheckpointError, match="expected transformers/CLASS"):
        load_model(LoadOptions(encoder_folder / "model.safetensors", arch="resnet18"))
