"""Hugging Face text models from the folders users save: the tokenizer bit-equal to transformers' own, the
`export-model DIR --onnx --fp16` journey for a sequence classifier, a token classifier and the real MiniLM
sentence-transformers folder (each verified on real sentences at two paddings), and the refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from text_folders import ENTITIES, MINILM, SENTIMENT, save_classifier

from modelship.contract.errors import ExportError
from modelship.contract.manifest import Manifest
from modelship.contract.tokenizer import TokenizerSpec
from modelship.export.text_inputs import TextSets, check_padding
from modelship.preprocess.tokenizer import TextTokenizer, sentences
from modelship.serve.client import TritonClient
from tests.cli_contract import expect_failure, invoke

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    return {
        "sentiment": save_classifier(root / "sentiment", "sequence"),
        "entities": save_classifier(root / "entities", "token"),
        "minilm": MINILM,
    }


@pytest.fixture(scope="module")
def exports(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each folder through the command of the issue, exactly: export-model DIR --onnx --fp16."""
    out = tmp_path_factory.mktemp("exports")
    made = {}
    for name, folder in folders.items():
        result = invoke("export", folder, "--onnx", "--fp16", "--name", name, "--out", out)
        assert result.exit_code == 0, result.output
        made[name] = out / name
    return made


def minilm_spec() -> TokenizerSpec:
    return TokenizerSpec(
        max_length=256, pad_id=0, pad_token="[PAD]", inputs=("input_ids", "attention_mask", "token_type_ids")
    )


def test_the_tokenizer_is_bit_equal_to_transformers_on_real_sentences() -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(MINILM)
    ours = TextTokenizer(MINILM / "tokenizer.json", minilm_spec())
    corpus = [*sentences(), "word " * 400, "🙂" * 50, "ça va? 你好 مرحبا", ""]
    for texts in [[t] for t in corpus] + [corpus]:
        expected = reference(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
        got = ours.encode(texts)
        assert set(got) == {"input_ids", "attention_mask", "token_type_ids"}
        for name, array in got.items():
            assert array.dtype == np.int64
            np.testing.assert_array_equal(array, expected[name], err_msg=f"{name} of {texts[:1]!r}")
    assert ours.encode(["word " * 400])["input_ids"].shape == (1, 256)  # truncated, special tokens included


def test_every_folder_exports_with_onnx_and_fp16_verified_on_two_paddings(exports: dict[str, Path]) -> None:
    expected = {"sentiment": ("text-classification", "logits", SENTIMENT), "entities": ("token-classification",
                "logits", ENTITIES), "minilm": ("sentence-embedding", "embedding", None)}  # fmt: skip
    for name, (task, output, labels) in expected.items():
        manifest = Manifest.read(exports[name])
        assert manifest.task == task and manifest.io.outputs[0].name == output
        assert manifest.labels == labels
        assert [a.name for a in manifest.artifacts] == ["onnx", "onnx_fp16"]
        assert all(a.parity is not None and a.parity.passed for a in manifest.artifacts)
        assert manifest.tokenizer is not None and (exports[name] / manifest.tokenizer.file).is_file()
        assert [i.name for i in manifest.io.inputs] == ["input_ids", "attention_mask", "token_type_ids"]
        assert manifest.io.inputs[0].shape == ("batch", "sequence")
    assert Manifest.read(exports["minilm"]).tokenizer.max_length == 256  # sentence_bert_config.json's
    assert Manifest.read(exports["entities"]).io.outputs[0].shape == ("batch", "sequence", len(ENTITIES))
    labels = [s.label for s in Manifest.read(exports["sentiment"]).artifacts[0].parity.per_batch or []]
    assert any("padded to" in label for label in labels), labels


def test_the_minilm_embedding_is_sentence_transformers_own(exports: dict[str, Path]) -> None:
    """The pooling and normalisation inside the graph are the folder's: the ONNX embedding equals what
    sentence-transformers computes, and paraphrases end up closer than unrelated sentences."""
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer

    texts = ["A man is playing a guitar on the stage.", "Someone is strumming a guitar in front of an audience.",
             "The stock market fell sharply after the announcement."]  # fmt: skip
    expected = SentenceTransformer(str(MINILM), device="cpu").encode(texts, convert_to_numpy=True)
    manifest = Manifest.read(exports["minilm"])
    inputs = TextTokenizer(exports["minilm"] / "tokenizer.json", manifest.tokenizer).encode(texts)
    session = ort.InferenceSession(str(exports["minilm"] / "model.onnx"), providers=["CPUExecutionProvider"])
    (embedding,) = session.run(["embedding"], inputs)
    np.testing.assert_allclose(embedding, expected, atol=2e-5)
    similarity = embedding @ embedding.T
    assert similarity[0, 1] > 0.5 > similarity[0, 2], similarity


def test_a_model_that_ignores_its_mask_is_refused() -> None:
    """Answers that change with padding (an attention mask not applied) stop the export."""
    tokenizer = TextTokenizer(MINILM / "tokenizer.json", minilm_spec())
    texts = ["a short one", "a somewhat longer sentence than that"]
    sets = TextSets([tokenizer.encode(texts), tokenizer.encode(texts, length=20)], ["2 texts", "padded"], (0, 1))
    summed = [{"logits": s["input_ids"].sum(axis=1, keepdims=True).astype(np.float32)} for s in sets.inputs]
    check_padding(summed, sets)  # the pad id is 0: sums do not change
    counted = [{"logits": np.full((2, 1), s["input_ids"].shape[1], np.float32)} for s in sets.inputs]
    with pytest.raises(ExportError, match="changes with padding"):
        check_padding(counted, sets)


def test_a_config_asking_for_custom_code_is_refused(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(folders["sentiment"], tmp_path / "custom")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"auto_map": {"AutoModel": "modeling_x.XModel"}}))
    expect_failure(["export", folder, "--onnx", "--out", tmp_path / "out"], names=["auto_map", "never runs code"],
                   untouched=[folder])  # fmt: skip


def test_a_bare_encoder_without_pooling_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "encoder"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(MINILM / name, folder / name)
    expect_failure(
        ["export", folder, "--onnx", "--out", tmp_path / "out"], names=["BertModel", "sentence-transformers"]
    )


def test_weights_that_do_not_fit_the_config_are_refused(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = shutil.copytree(folders["sentiment"], tmp_path / "wrong")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"intermediate_size": 48}))
    expect_failure(["export", folder, "--onnx", "--out", tmp_path / "out"], names=["does not fit", "intermediate"])


def test_a_weights_file_with_its_config_beside_it_loads(folders: dict[str, Path]) -> None:
    result = invoke("inspect", folders["sentiment"] / "model.safetensors", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["arch"] == "transformers/BertForSequenceClassification", report


@pytest.mark.integration
def test_every_pipeline_answers_texts_over_http_and_grpc(exports: dict[str, Path], tmp_path: Path) -> None:
    """`publish` (defaults) writes NAME_tokenize -> NAME_onnx as NAME_pipeline; over HTTP and gRPC each answers
    texts exactly as ONNX Runtime does on the client's own tokenization; MiniLM's paraphrases stay closer than
    unrelated sentences through the server; a text that is not UTF-8 fails its own request only; a photo sent to a
    text pipeline is refused from the served model's metadata, naming --text and --texts."""
    import onnxruntime as ort

    from modelship.contract.errors import ClientError
    from modelship.serve.server import TritonServer

    for folder in exports.values():
        assert invoke("publish", folder, "--repo", tmp_path / "repo").exit_code == 0
    texts = ["A man is playing a guitar on the stage.", "Someone is strumming a guitar in front of an audience.",
             "The stock market fell sharply after the announcement.", "Crème brûlée 🙂 東京"]  # fmt: skip
    request = {"TEXT": np.array([[t.encode()] for t in texts], dtype=object)}
    with TritonServer(tmp_path / "repo") as server:
        for name, folder in exports.items():
            manifest = Manifest.read(folder)
            output = manifest.io.outputs[0].name
            session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
            (expected,) = session.run(
                [output], TextTokenizer(folder / "tokenizer.json", manifest.tokenizer).encode(texts)
            )
            for url in (server.http_url, server.grpc_url):
                with TritonClient(url) as client:
                    answer = client.infer(f"{name}_pipeline", request, outputs=[output])[output]
                np.testing.assert_allclose(answer, expected, atol=1e-5, err_msg=f"{name} over {url}")
            if name == "minilm":
                similarity = answer @ answer.T
                assert similarity[0, 1] > 0.5 > similarity[0, 2], similarity
        shown = {name: invoke("infer", "--model", f"{name}_pipeline", "--url", server.grpc_url, *(w for t in texts[:3]
                 for w in ("--text", t)), "--json") for name in exports}  # fmt: skip
        printed = invoke("infer", "--model", "minilm_pipeline", "--url", server.http_url, "--text", texts[0],
                         "--text", texts[1])  # fmt: skip
        (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
        served_parity = ("--texts", tmp_path / "texts.txt", "--served", server.grpc_url, "--json")
        parity = {name: invoke("parity", folder, *served_parity, "--served-model", f"{name}_pipeline")
                  for name, folder in exports.items()}  # fmt: skip
        (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 a JPEG, never sent")
        expect_failure(["infer", tmp_path / "photo.jpg", "--model", "sentiment_pipeline", "--url", server.http_url],
                       names=["a text-classification model", "takes texts", "--text TEXT", "--texts FILE"])  # fmt: skip
        with server.client() as client, pytest.raises(ClientError, match="not UTF-8"):
            client.infer("sentiment_pipeline", {"TEXT": np.array([[b"\xff\xfe broken"]], dtype=object)})
        with server.client() as client, pytest.raises(ClientError, match="over the 1 MiB a text may be"):
            client.infer("sentiment_pipeline", {"TEXT": np.array([[b"word " * (1 << 18)]], dtype=object)})
        assert server.client().ready()
    for result in (*shown.values(), printed):
        assert result.exit_code == 0, result.output
    answers = {name: json.loads(result.stdout) for name, result in shown.items()}
    assert [entry["label"] for entry in answers["sentiment"]["top_k"][0]] != []
    assert set(answers["sentiment"]["top_k"][0][0]) == {"index", "label", "score", "probability"}
    assert all(set(row) <= set(ENTITIES) for row in answers["entities"]["labels"])
    similarity = answers["minilm"]["similarity"]
    assert similarity[0][1] > 0.5 > similarity[0][2] and len(answers["minilm"]["embeddings"][0]) == 384
    assert "cosine similarity:" in printed.output and printed.output.startswith(f"[0] {texts[0]}"), printed.output
    for name, result in parity.items():  # eager transformers with its own tokenizer vs every artifact and the server
        assert result.exit_code == 0, result.output
        reports = json.loads(result.stdout)["reports"]
        assert [r["candidate"] for r in reports] == ["onnx", "onnx_fp16", f"triton:{name}_pipeline"], name
        served = reports[-1]
        assert served["passed"] and [row["label"] for row in served["per_batch"]] == ["text 1 alone", "texts 1-4"]


def test_torchscript_says_why_it_cannot_script_and_traces_when_asked(folders: dict[str, Path], tmp_path: Path) -> None:
    """transformers models do not script (they hold their config); the one-line error names the construct and
    --trace, which traces them, judged at every batch size, sequence length and padding."""
    args = ["export", folders["sentiment"], "--torchscript", "--out", tmp_path / "out"]
    payload = expect_failure(args, names=["torch.jit.script failed", "--trace"], untouched=[folders["sentiment"]])
    assert "BertConfig" in payload["error"], payload["error"]
    traced = invoke("export", folders["entities"], "--torchscript", "--trace", "--out", tmp_path / "out", "--json")
    assert traced.exit_code == 0, traced.output
    (artifact,) = json.loads(traced.stdout)["artifacts"]
    assert artifact["parity"]["passed"] and artifact["parity"]["outputs"][0]["top1_agreement"] == 1.0


def test_pytorch_model_bin_weights_load_as_safetensors_do(folders: dict[str, Path], tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    folder = shutil.copytree(folders["sentiment"], tmp_path / "bin")
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    result = invoke("inspect", folder, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["format"] == "torch" and report["ok"], report
    assert f"weights read from {folder / 'pytorch_model.bin'}" in report["notes"], report["notes"]
