from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from modelship.cli.main import COMMANDS, main
from modelship.contract.errors import ModelshipError, UsageError
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.manifest import Artifact, ExportFile, Manifest, Source, sha256_file


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_tensor_spec_validates_and_round_trips() -> None:
    spec = TensorSpec("input_ids", ("batch", "sequence"), "int64", (0, 100))
    assert spec.dynamic_axes == {0: "batch", 1: "sequence"}
    assert spec.concrete_shape({"batch": 2, "sequence": 7}) == (2, 7)
    assert TensorSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(UsageError):
        TensorSpec("x", (0,))
    with pytest.raises(UsageError):
        TensorSpec("x", (1,), "float99")


def test_io_spec_batched_and_unique_names() -> None:
    io = IOSpec((TensorSpec("image", ("batch", 3, 224, 224)),), (TensorSpec("logits", ("batch", 1000)),))
    assert io.batched
    assert IOSpec.from_dict(io.to_dict()) == io
    with pytest.raises(UsageError):
        IOSpec((TensorSpec("x", (1,)),), (TensorSpec("x", (1,)),))


def test_manifest_round_trip(tmp_path) -> None:
    io = IOSpec((TensorSpec("image", ("batch", 3, 8, 8)),), (TensorSpec("logits", ("batch", 10)),))
    manifest = Manifest(
        name="m",
        source=Source("ckpt.pt", "ab" * 32, "resnet18"),
        io=io,
        artifacts=[Artifact("onnx", "onnx", "fp32", "model.onnx", "cd" * 32, io)],
    )
    manifest.write(tmp_path)
    again = Manifest.read(tmp_path)
    assert again.to_dict() == manifest.to_dict()
    assert again.artifact("onnx").file == "model.onnx"
    with pytest.raises(ModelshipError, match="no artifact"):
        again.artifact("nope")
    with pytest.raises(ModelshipError, match=r"no manifest\.json"):
        Manifest.read(tmp_path / "missing")
    assert again.task == "classification" and again.artifact("onnx").details.format == "onnx"
    newer = {**manifest.to_dict(), "schema_version": 99}
    (tmp_path / "manifest.json").write_text(json.dumps(newer))
    with pytest.raises(ModelshipError, match="schema_version 99: this modelship reads versions 1 to 1; re-export"):
        Manifest.read(tmp_path)


def test_a_manifest_written_before_files_were_hashed_reads_as_nothing_to_check(tmp_path) -> None:
    """No `files`: nothing beside the artifacts to check, unless the export has a tokenizer (it would go
    unverified); a recorded file is checked by its sha256."""
    io = IOSpec((TensorSpec("image", ("batch", 3, 8, 8)),), (TensorSpec("logits", ("batch", 10)),))
    older = Manifest(name="m", source=Source("ckpt.pt", "ab" * 32, "resnet18"), io=io).to_dict()
    del older["files"]
    manifest = Manifest.from_dict(older)
    assert manifest.files == []
    manifest.refuse_changed_files(tmp_path, UsageError)
    (tmp_path / "tokenizer.json").write_text("{}")
    texts = Manifest.from_dict({**older, "tokenizer": {"max_length": 8, "pad_id": 0, "pad_token": "[PAD]"}})
    with pytest.raises(UsageError, match=r"tokenizer\.json has no sha256 in manifest\.json"):
        texts.refuse_changed_files(tmp_path, UsageError)
    texts.files = [ExportFile("tokenizer", "tokenizer.json", sha256_file(tmp_path / "tokenizer.json"))]
    texts.refuse_changed_files(tmp_path, UsageError)
    assert Manifest.from_dict(texts.to_dict()).files == texts.files
    (tmp_path / "tokenizer.json").write_text("{} ")
    with pytest.raises(UsageError, match=r"tokenizer\.json changed since export"):
        texts.refuse_changed_files(tmp_path, UsageError)


def test_flatten_outputs_names() -> None:
    from collections import namedtuple

    import numpy as np

    from modelship.contract.outputs import flatten_outputs

    a, b = np.zeros(1), np.ones(1)
    assert [n for n, _ in flatten_outputs(a)] == ["output"]
    assert [n for n, _ in flatten_outputs((a, b))] == ["output_0", "output_1"]
    assert [n for n, _ in flatten_outputs({"logits": a, "aux": (a, b)})] == ["logits", "aux_0", "aux_1"]
    pair = namedtuple("Pair", "logits aux1")
    assert [n for n, _ in flatten_outputs(pair(a, b))] == ["logits", "aux1"]


def test_bad_flag_with_json_still_prints_one_json_object(tmp_path) -> None:
    result = CliRunner().invoke(main, ["parity", str(tmp_path), "--batch-sizes", "1,x", "--json"])
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and "--batch-sizes" in payload["error"]
