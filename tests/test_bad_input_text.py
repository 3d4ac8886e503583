"""Bad input on the text model kinds (Hugging Face folders, text pipelines): one line naming the cause and the fix,
a non-zero exit, exactly one JSON object with --json, no traceback and nothing changed on disk
(tests/cli_contract.py). The case of an image sent to a served text pipeline is checked against a real server in
tests/test_text_models.py; here the command's decision is checked with the model's metadata alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from text_folders import save_classifier

from modelship.contract.manifest import EXPORT_MANIFEST, Manifest, sha256_file
from modelship.serve.model_info import ModelInfo, TensorInfo
from modelship.serve.text_pipeline import TEXT
from modelship.serve.triton_config import PARAM_TASK
from tests.cli_contract import expect_failure, invoke

pytestmark = pytest.mark.slow

UNREACHABLE = "127.0.0.1:9"  # nothing listens there: a text refused before any request never finds out


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_classifier(tmp_path_factory.mktemp("hf") / "sentiment")


@pytest.fixture(scope="module")
def export(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exports")
    result = invoke("export", folder, "--onnx", "--name", "sentiment", "--out", out)
    assert result.exit_code == 0, result.output
    return out / "sentiment"


def edited(folder: Path, target: Path, **config: Any) -> Path:
    """A copy of `folder` with config.json's fields `config` replaced."""
    copy = shutil.copytree(folder, target)
    data = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(data | config))
    return copy


def test_a_text_that_is_not_utf8_is_refused_before_any_request(tmp_path: Path) -> None:
    """The shell passes `$'\\xff'` through; Python holds the byte as a lone surrogate, which no request can carry."""
    ask = ["infer", "--model", "sentiment_pipeline", "--url", UNREACHABLE]
    expect_failure([*ask, "--text", "fine", "--text", "bad \udcff byte"], names=["--text 2", "not UTF-8", "0xff"])
    texts = tmp_path / "texts.txt"
    texts.write_bytes("first line\n\nthird \xe9 line\n".encode("latin-1"))
    expect_failure([*ask, "--texts", texts], names=[str(texts), "line 3", "not UTF-8", "0xe9", "save it as UTF-8"])


def test_an_oversized_text_is_refused_before_any_request(tmp_path: Path) -> None:
    """A 2 MiB line (past MAX_TEXT_BYTES; the model reads only its first max_length tokens) is refused naming its
    size and the limit, before any request: sent, it held the server's tokenizer until the request timed out."""
    ask = ["infer", "--model", "sentiment_pipeline", "--url", UNREACHABLE]
    huge = "word " * (2 << 18)
    expect_failure([*ask, "--text", "fine", "--text", huge], names=["--text 2", "2.5 MiB", "over the 1 MiB"])
    texts = tmp_path / "texts.txt"
    texts.write_text(f"short\n{huge}\n")
    expect_failure([*ask, "--texts", texts], names=[str(texts), "line 2", "over the 1 MiB", "shorter text"])


def test_a_tokenizer_beyond_the_embedding_table_is_refused(tmp_path: Path) -> None:
    """The MiniLM tokenizer (30522 tokens) on a model whose input embedding has 1000 rows: refused at load, naming
    the ids out of range, before any forward pass (it ended in an IndexError inside torch.embedding)."""
    small = save_classifier(tmp_path / "small", vocab_size=1000)
    names = ["tokenizer.json", "1000..30521", "1000-row input embedding", "vocab_size 1000"]
    expect_failure(["export", small, "--onnx", "--out", tmp_path / "out"], names=names, untouched=[small])


def test_the_tokenizer_is_part_of_the_exports_integrity(export: Path, tmp_path: Path) -> None:
    """tokenizer.json's sha256 is in the manifest; publish and parity refuse one changed after export (two token
    ids swapped), and a text export whose manifest predates the record (no sha256 to check it by)."""
    manifest = Manifest.read(export)
    (record,) = manifest.files
    assert (record.role, record.file) == ("tokenizer", "tokenizer.json")
    assert record.sha256 == sha256_file(export / "tokenizer.json")
    swapped = shutil.copytree(export, tmp_path / "swapped")
    tokenizer = json.loads((swapped / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["the"], vocab["a"] = vocab["a"], vocab["the"]
    (swapped / "tokenizer.json").write_text(json.dumps(tokenizer))
    repo = tmp_path / "repo"
    changed = ["tokenizer.json changed since export", "re-export"]
    expect_failure(["publish", swapped, "--repo", repo], names=changed, untouched=[repo, swapped])
    expect_failure(["parity", swapped, "--against", "golden"], names=changed, untouched=[swapped])
    unrecorded = shutil.copytree(export, tmp_path / "unrecorded")
    data = json.loads((unrecorded / EXPORT_MANIFEST).read_text())
    del data["files"]
    (unrecorded / EXPORT_MANIFEST).write_text(json.dumps(data))
    expect_failure(["publish", unrecorded, "--repo", repo], names=["tokenizer.json", "no sha256", "re-export"])
    assert invoke("publish", export, "--repo", repo).exit_code == 0


def test_a_folder_exports_what_its_kind_exports_when_no_format_is_named(folder: Path, tmp_path: Path) -> None:
    """`export-model DIR`, the first command a newcomer types: ONNX, and why TorchScript was left out and how to ask
    for it (transformers models do not script)."""
    plain = invoke("export", folder, "--out", tmp_path / "out")
    assert plain.exit_code == 0, plain.output
    assert "TorchScript skipped: transformers models do not script; --torchscript --trace exports it traced" in (
        plain.stderr
    ), plain.stderr
    as_json = invoke("export", folder, "--out", tmp_path / "out", "--name", "again", "--json")
    assert as_json.exit_code == 0, as_json.output
    payload = json.loads(as_json.stdout)
    assert [a["name"] for a in payload["artifacts"]] == ["onnx"]
    assert payload["skipped"] == [{"format": "torchscript", "why": "transformers models do not script",
                                   "ask": "--torchscript --trace exports it traced"}]  # fmt: skip


def test_architectures_as_a_string_is_refused_naming_the_field(folder: Path, tmp_path: Path) -> None:
    wrong = edited(folder, tmp_path / "wrong", architectures="BertForSequenceClassification")
    names = [
        "'architectures'",
        'list of class names, not "BertForSequenceClassification"',
        '["BertForSequenceClassification"]',
    ]
    expect_failure(["inspect", wrong], names=names)


def test_labels_that_do_not_fit_the_head_are_refused(tmp_path: Path) -> None:
    """A sparse id2label on a 2-output head exported with 100001 labels."""
    pair = save_classifier(tmp_path / "pair", labels=["no", "yes"])
    sparse = edited(pair, tmp_path / "sparse", id2label={"0": "no", "100000": "yes"})
    names = ["id2label", "0, 100000", "2 outputs", '"0" to "1"']
    expect_failure(["export", sparse, "--onnx", "--out", tmp_path / "out"], names=names, untouched=[sparse])
    words = edited(pair, tmp_path / "words", id2label={"no": "no", "yes": "yes"})
    expect_failure(["inspect", words], names=["id2label", "'no'", '"0" to "1"'])
    three = save_classifier(tmp_path / "three")  # num_labels sizes the head: transformers then drops id2label
    resized = edited(three, tmp_path / "resized", id2label={"0": "no", "1": "yes"}, num_labels=3)
    expect_failure(["inspect", resized], names=["id2label has 2 labels", "head of 3 outputs", "num_labels"])


def test_a_model_type_that_contradicts_the_architecture_is_refused(folder: Path, tmp_path: Path) -> None:
    """transformers' Auto classes would build a gpt2 model from this folder (every weight missing), its BERT class
    only with a warning; modelship says which field to fix, and --arch builds the named class anyway."""
    contradicting = edited(folder, tmp_path / "gpt2", model_type="gpt2")
    names = ["model_type 'gpt2'", "BertForSequenceClassification", "'bert'", "--arch transformers/"]
    expect_failure(["inspect", contradicting], names=names)
    chosen = invoke("inspect", contradicting, "--arch", "transformers/BertForSequenceClassification", "--json")
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout)["ok"]


class OneModel:
    """A client of a server that serves `info` alone; a request would fail the test."""

    def __init__(self, info: ModelInfo) -> None:
        self.info = info
        self.url = UNREACHABLE

    def __call__(self, url: str | None, protocol: str | None) -> OneModel:
        return self

    def __enter__(self) -> OneModel:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def model(self, name: str) -> ModelInfo:
        return self.info

    def infer_many(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("a photo was sent to a text model")


def text_pipeline_info(task: str = "text-classification") -> ModelInfo:
    """What Triton says about a published text pipeline: TEXT (BYTES) in, its task in the config parameters."""
    return ModelInfo(
        name="sentiment_pipeline",
        versions=("1",),
        platform="ensemble",
        inputs=(TensorInfo(TEXT, "BYTES", (-1, 1)),),
        outputs=(TensorInfo("logits", "FP32", (-1, 3)),),
        max_batch_size=8,
        parameters={PARAM_TASK: task},
    )


@pytest.mark.parametrize("task", ["text-classification", "token-classification", "sentence-embedding"])
def test_a_photo_sent_to_a_text_model_is_refused(task: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("modelship.cli.infer.TritonClient", OneModel(text_pipeline_info(task)))
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff\xe0 a JPEG")
    names = ["sentiment_pipeline", f"a {task} model", "takes texts", "--text TEXT", "--texts FILE"]
    expect_failure(["infer", photo, "--model", "sentiment_pipeline"], names=names)
