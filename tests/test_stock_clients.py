"""Triton's own clients accept what `publish` writes: a client written like Triton's example image client (model
metadata and config only, no modelship code) classifies a real photo with the same top-5 as `modelship infer`, and
the classification extension (`class_count`) answers `score:index:label` for every published classifier, over HTTP
and gRPC."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import skimage
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from serve_exports import LABELS, write_export

from modelship.serve.publish import publish_export
from modelship.serve.server import TritonServer
from tests.cli_contract import invoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PHOTO = Path(skimage.__file__).parent / "data" / "chelsea.png"
PROTOCOLS = ("http", "grpc")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("stock_clients")
    repo = root / "repo"
    # fp16 artifacts with FP16 I/O (--fp16-io); the pipeline (encoded images in) is tests/test_pipeline.py's
    publish_export(write_export(root / "tiny"), repo, pipeline=None)
    publish_export(
        write_export(root / "tiny32", "tiny32", fp16_io=False), repo, artifacts=["onnx_fp16", "torchscript_fp16"]
    )
    with TritonServer(repo) as triton:
        yield triton


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def image_client_setup(http: str, model: str) -> dict:
    """What Triton's example image_client.py checks before it sends anything (its parse_model), from the HTTP
    metadata and config endpoints only."""
    meta = get_json(f"{http}/v2/models/{model}")
    config = get_json(f"{http}/v2/models/{model}/config")
    if len(meta["inputs"]) != 1 or len(meta["outputs"]) != 1:
        raise ValueError("expecting 1 input and 1 output")
    if meta["outputs"][0]["datatype"] != "FP32":
        raise ValueError(f"expecting output datatype to be FP32, model '{model}' output type is "
                         f"{meta['outputs'][0]['datatype']}")  # fmt: skip
    fmt = config["input"][0].get("format", "FORMAT_NONE")
    if fmt not in ("FORMAT_NCHW", "FORMAT_NHWC"):
        raise ValueError(f"unexpected input format {fmt}, expecting FORMAT_NCHW or FORMAT_NHWC")
    dims = meta["inputs"][0]["shape"][1:] if config.get("max_batch_size", 0) > 0 else meta["inputs"][0]["shape"]
    c, h, w = dims if fmt == "FORMAT_NCHW" else (dims[2], dims[0], dims[1])
    spec = json.loads(config["parameters"]["modelship.preprocess"]["string_value"])  # published beside the model
    return {"input": meta["inputs"][0], "output": meta["outputs"][0]["name"], "format": fmt, "hw": (h, w),
            "channels": c, "spec": spec, "batched": config.get("max_batch_size", 0) > 0}  # fmt: skip


def preprocess(path: Path, setup: dict) -> np.ndarray:
    """Resize the shorter side, center-crop, scale and normalize, laid out as the config's `format` says."""
    spec, (h, w) = setup["spec"], setup["hw"]
    image = Image.open(path).convert("RGB")
    scale = spec["resize"] / min(image.size)
    image = image.resize((max(w, int(image.width * scale)), max(h, int(image.height * scale))), Image.BILINEAR)
    left, top = round((image.width - w) / 2), round((image.height - h) / 2)
    pixels = np.asarray(image.crop((left, top, left + w, top + h)), dtype=np.float32) / 255.0
    pixels = (pixels - np.array(spec["mean"], np.float32)) / np.array(spec["std"], np.float32)
    if setup["format"] == "FORMAT_NCHW":
        pixels = pixels.transpose(2, 0, 1)
    return pixels[None] if setup["batched"] else pixels


def classify(url: str, protocol: str, model: str, pixels: np.ndarray, setup: dict, class_count: int = 0):
    lib = httpclient if protocol == "http" else grpcclient
    address = url.split("://", 1)[1]
    client = lib.InferenceServerClient(address)
    entry = lib.InferInput(setup["input"]["name"], list(pixels.shape), setup["input"]["datatype"])
    entry.set_data_from_numpy(pixels.astype(np.float16 if setup["input"]["datatype"] == "FP16" else np.float32))
    requested = lib.InferRequestedOutput(setup["output"], class_count=class_count)
    result = client.infer(model, [entry], outputs=[requested])
    client.close()
    return result.as_numpy(setup["output"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_image_client_written_like_tritons_gets_the_same_top5(server: TritonServer, protocol: str) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    for model in ("tiny_onnx", "tiny_torchscript", "tiny32_onnx_fp16", "tiny32_torchscript_fp16"):
        setup = image_client_setup(server.http_url, model)
        scores = classify(url, protocol, model, preprocess(PHOTO, setup), setup)[0]
        ours = invoke("infer", PHOTO, "--model", model, "--url", url, "--top-k", "5", "--json")
        assert ours.exit_code == 0, ours.output
        expected = [entry["index"] for entry in json.loads(ours.stdout)["predictions"][0]["top_k"]]
        assert list(np.argsort(-scores, kind="stable")[:5]) == expected, model


def test_fp16_io_models_declare_what_the_image_client_refuses(server: TritonServer) -> None:
    for model in ("tiny_onnx_fp16", "tiny_torchscript_fp16"):  # --fp16-io: FP16 out, as asked
        with pytest.raises(ValueError, match="expecting output datatype to be FP32"):
            image_client_setup(server.http_url, model)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_classification_extension_answers_for_every_classifier(server: TritonServer, protocol: str) -> None:
    url = server.http_url if protocol == "http" else server.grpc_url
    with server.client() as client:
        index = client.repository_index()
    checked = []
    for model in sorted(m.name for m in index):
        config = get_json(f"{server.http_url}/v2/models/{model}/config")
        output = config["output"][0]
        if output["data_type"] == "TYPE_FP16":  # the extension cannot rank FP16: no labels attached
            assert not output.get("label_filename"), model
            continue
        assert output["label_filename"] == "labels.txt", model
        setup = image_client_setup(server.http_url, model)
        entries = classify(url, protocol, model, preprocess(PHOTO, setup), setup, class_count=5)[0]
        decoded = [e.decode() if isinstance(e, bytes) else str(e) for e in entries]
        assert len(decoded) == 5
        for text in decoded:
            score, idx, label = text.split(":", 2)
            float(score)
            assert LABELS[int(idx)] == label, (model, text)
        checked.append(model)
    assert sorted(checked) == ["tiny32_onnx_fp16", "tiny32_torchscript_fp16", "tiny_onnx", "tiny_torchscript"]
