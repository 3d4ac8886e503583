"""The local stand-in backends accept what Triton's native ONNX Runtime and LibTorch backends accept and refuse
what they refuse, at load, with their wording; and their request batching. Unit tests of the pure rules first, then
the real server loading configs the native backends would refuse beside ones they accept."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from serve_exports import SIZE, TinyNet, eager, tiny_model, write_export

from modelship.serve.backends.modelship_backend import (
    ConfigError,
    check_tensors,
    torch_argument_order,
    torch_output_order,
)
from modelship.serve.client import TritonClient
from modelship.serve.publish import publish_export
from modelship.serve.server import TritonServer

GRAPH = {"image": ("TYPE_FP32", [-1, 3, 16, 16])}


def config(dims=(3, 16, 16), name="image", dtype="TYPE_FP32", batch=16, **extra):
    return {"name": "m", "max_batch_size": batch, "input": [{"name": name, "data_type": dtype, "dims": list(dims)}]}


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (
            config(dtype="TYPE_FP16"),
            "configuration expects datatype TYPE_FP16 for input 'image', model provides TYPE_FP32",
        ),
        (config(name="img"), "unexpected inference input 'img', allowed inputs are: image"),
        (
            config(dims=(3, 16)),
            "model 'm', tensor 'image': the model expects 4 dimensions (shape [-1,3,16,16]) but the model "
            "configuration specifies 3 dimensions (an initial batch dimension because max_batch_size > 0 followed "
            "by the explicit tensor shape, making complete shape [-1,3,16])",
        ),
        (config(dims=(3, 16, 16, 1), batch=0), "specifies 4 dimensions (shape [3,16,16,1])"),
        ({**config(), "input": []}, "unable to load model 'm', configuration expects 0 inputs, model provides 1"),
    ],
)
def test_onnx_inputs_are_refused_as_natively(cfg: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_tensors(cfg, "input", GRAPH, exact=False)
    assert message in str(err.value)


def test_onnx_rules_that_pass() -> None:
    check_tensors(config(), "input", GRAPH, exact=False)
    check_tensors(config(dims=(3, 16, 16)), "input", {"image": ("TYPE_FP32", [-1, 3, -1, -1])}, exact=False)


def test_batching_needs_a_dynamic_first_dim_and_outputs_compare_exactly() -> None:
    with pytest.raises(ConfigError, match=r"the first dimension must be -1; but shape expected by the model is \[1,3"):
        check_tensors(config(), "input", {"image": ("TYPE_FP32", [1, 3, 16, 16])}, exact=False)
    out = {"name": "m", "max_batch_size": 16, "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1]}]}
    with pytest.raises(ConfigError, match="the model expects 2 dimensions"):
        check_tensors(out, "output", {"y": ("TYPE_FP32", [-1, 5])}, exact=True)
    with pytest.raises(ConfigError, match="unexpected inference output 'y', allowed outputs are: logits"):
        check_tensors(out, "output", {"logits": ("TYPE_FP32", [-1, 5])}, exact=True)


def test_libtorch_naming_conventions() -> None:
    def names(*inputs: str, outputs: tuple[str, ...] = ("OUTPUT__0",)) -> dict:
        return {"name": "m", "input": [{"name": n} for n in inputs], "output": [{"name": n} for n in outputs]}

    assert torch_argument_order(names("mask", "x"), ["x", "mask"]) == ["x", "mask"]  # forward-argument names
    assert torch_argument_order(names("INPUT__1", "INPUT__0"), ["x", "mask"]) == ["INPUT__0", "INPUT__1"]
    assert torch_argument_order(names("b", "a"), ["x", "mask"]) == ["b", "a"]  # neither: config order
    assert torch_output_order(names("x", outputs=("OUTPUT__1", "OUTPUT__0"))) == ["OUTPUT__0", "OUTPUT__1"]
    assert torch_output_order(names("x", outputs=("output",))) == ["output"]
    with pytest.raises(ConfigError, match="configuration expects 2 inputs, model provides 1"):
        torch_argument_order(names("x", "y"), ["x"])


@pytest.mark.integration
@pytest.mark.slow
def test_the_real_server_refuses_and_accepts_like_the_native_backends(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    publish_export(write_export(tmp_path / "tiny"), repo, artifacts=["onnx", "torchscript"], pipeline=None)
    variants = {
        "onnx_fp16_type": ("tiny_onnx", lambda t: t.replace("data_type: TYPE_FP32", "data_type: TYPE_FP16", 1)),
        "onnx_bad_name": ("tiny_onnx", lambda t: t.replace('name: "image"', 'name: "img"')),
        "onnx_bad_dims": (  # without `format`, which Triton's core checks first (image inputs need 3 dims)
            "tiny_onnx",
            lambda t: t.replace("dims: 16\n  dims: 16", "dims: 16", 1).replace("format: FORMAT_NCHW\n", ""),
        ),
        "ts_forward_names": (
            "tiny_torchscript",
            lambda t: t.replace('"INPUT__0"', '"image"').replace('"OUTPUT__0"', '"output"'),
        ),
    }
    for name, (source, edit) in variants.items():
        shutil.copytree(repo / source, repo / name)
        text = (repo / source / "config.pbtxt").read_text().replace(f'name: "{source}"', f'name: "{name}"', 1)
        (repo / name / "config.pbtxt").write_text(edit(text))
    shm_before = set(Path("/dev/shm").iterdir())
    with TritonServer(repo) as server:
        with server.client() as client:
            states = {m.name: m for m in client.repository_index()}
        assert (
            "configuration expects datatype TYPE_FP16 for input 'image', model provides TYPE_FP32"
            in states["onnx_fp16_type"].reason
        )
        assert "unexpected inference input 'img', allowed inputs are: image" in states["onnx_bad_name"].reason
        assert "the model expects 4 dimensions" in states["onnx_bad_dims"].reason
        ready = sorted(n for n, m in states.items() if m.ready)
        assert ready == ["tiny_onnx", "tiny_torchscript", "ts_forward_names"]
        batch = np.random.default_rng(0).standard_normal((3, 3, SIZE, SIZE)).astype(np.float32)
        with TritonClient(server.http_url) as client:
            out = client.infer("ts_forward_names", {"image": batch})["output"]
        np.testing.assert_allclose(out, eager(tiny_model(TinyNet), batch), atol=1e-5)
        assert server.running
    assert not set(Path("/dev/shm").iterdir()) - shm_before, "shared-memory regions left behind"
