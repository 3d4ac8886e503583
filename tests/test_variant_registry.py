"""Precision variants are a registry keyed by (format, precision): a toy precision and its ONNX variant (the fp32
graph with its weights rounded to bfloat16's 8-bit mantissa, written to model.toy.onnx) are registered entirely
from inside this test and reached the way users reach fp16: `export-model`'s own `--toy` flag (generated from the
registry, listed by `--help`), the manifest, `modelship parity`'s `--served-precision` choices and its golden
re-check. The flags that need a variant refuse, in one line, what cannot be."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from modelship.contract.precisions import PRECISIONS, Precision, get_precision, register_precision
from modelship.contract.tolerance import Tolerance
from modelship.export.build import Build, BuiltArtifact, Finish, Written
from modelship.export.formats.onnx.graph import write_model
from modelship.export.precision.registry import Variant, register_variant, unregister_variant
from modelship.parity import OnnxRuntimeRunner
from tests.checkpoint_factory import make_tinynet, realistic
from tests.cli_contract import invoke

TOY = "toy"


def start_toy(build: Build, written: Written) -> Finish:
    """The fp32 graph with every float weight rounded to 8 mantissa bits, verified against eager."""
    proto = onnx.ModelProto()
    proto.CopyFrom(written.graph)
    for index, weight in enumerate(proto.graph.initializer):
        values = numpy_helper.to_array(weight)
        if values.dtype == np.float32:
            rounded = (values.view(np.uint32) + 0x8000) & 0xFFFF0000
            proto.graph.initializer[index].CopyFrom(numpy_helper.from_array(rounded.view(np.float32), weight.name))
    name = f"onnx_{TOY}"
    with build.steps(f"round {name}", name):
        sha256 = write_model(proto, build.path(name), external=False)
    runner = OnnxRuntimeRunner(build.path(name), written.io, name=name, isolated=False)
    try:
        report = build.verify(name, runner, TOY)
    finally:
        runner.close()
    built = BuiltArtifact(name, "onnx", TOY, written.io, report, written.details, sha256)
    return lambda: built


@pytest.fixture(scope="module")
def toy_variant() -> Iterator[str]:
    fp16 = get_precision("fp16").tolerance
    register_precision(Precision(TOY, f"--{TOY}", "Also write the toy bfloat16-rounded ONNX variant.", fp16))
    variant = register_variant(Variant("onnx", TOY, "model.toy.onnx", start_toy))
    yield variant.name
    unregister_variant(variant.name)
    PRECISIONS.pop(TOY)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("toy")
    model, _ = realistic(make_tinynet())
    torch.save(model.state_dict(), folder / "tiny.pt")
    return folder / "tiny.pt"


ARCH = ("--arch", "tests.checkpoint_factory:make_tinynet")


def test_a_registered_variant_is_reached_through_export_models_own_flag(
    toy_variant: str, checkpoint: Path, tmp_path: Path
) -> None:
    shown = invoke("export", "--help")
    assert shown.exit_code == 0 and "--toy" in shown.output and "bfloat16-rounded" in shown.output
    result = invoke("export", checkpoint, *ARCH, "--onnx", "--toy", "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    artifacts = {a["name"]: a for a in payload["artifacts"]}
    assert list(artifacts) == ["onnx", toy_variant]
    toy = artifacts[toy_variant]
    assert toy["precision"] == TOY and toy["file"] == "model.toy.onnx" and toy["parity"]["passed"]
    assert (tmp_path / "tiny" / "model.toy.onnx").is_file()
    again = invoke("parity", tmp_path / "tiny", "--against", "golden", "--artifact", toy_variant, "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["passed"], again.output
    choices = invoke("parity", "--help")
    assert TOY in choices.output


def test_the_toy_tolerance_and_flags_come_from_its_precision(toy_variant: str) -> None:
    assert get_precision(TOY).default_tolerance("classification") == get_precision("fp16").tolerance
    from modelship.export.spec import ExportSpec

    with pytest.raises(Exception, match="--toy: TorchScript has no toy variant"):
        ExportSpec(out_dir=Path("unused"), formats=("torchscript",), precisions=(TOY,))


def test_precision_options_refuse_what_cannot_be(checkpoint: Path, tmp_path: Path) -> None:
    cases = {
        ("--torchscript", "--int8"): "--int8: TorchScript has no int8 variant (int8 is written for ONNX)",
        ("--onnx", "--calibrate", str(tmp_path)): "--calibrate needs --int8",
        ("--onnx", "--keep-slower"): "--keep-slower needs --int8",
        ("--onnx", "--int8-cpu", "vnni"): "--int8-cpu needs --int8",
        ("--onnx", "--fp16-io"): "--fp16-io needs --fp16",
    }
    for flags, message in cases.items():
        result = invoke("export", checkpoint, *ARCH, *flags, "--out", tmp_path / "out", "--json")
        assert result.exit_code != 0 and message in json.loads(result.stdout)["error"], (flags, result.output)
        assert not (tmp_path / "out").exists()


def test_int8_of_an_image_model_without_calibration_images_says_what_to_give(checkpoint: Path, tmp_path: Path) -> None:
    result = invoke("export", checkpoint, *ARCH, "--onnx", "--int8", "--out", tmp_path, "--json")
    error = json.loads(result.stdout)["error"]
    assert result.exit_code != 0 and "--calibrate FOLDER" in error and "a few hundred images" in error, error
    assert len(error.splitlines()) == 1 and not any(tmp_path.iterdir())


def test_tolerance_defaults_per_task() -> None:
    int8 = get_precision("int8")
    assert int8.default_tolerance("classification").min_top1 == 0.9
    assert int8.default_tolerance("sentence-embedding").min_cosine == 0.99
    assert not int8.default_tolerance().elementwise
    assert get_precision("fp32").default_tolerance("segmentation") == get_precision("fp32").tolerance
    assert isinstance(int8.tolerance, Tolerance)
