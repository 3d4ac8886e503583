"""More images than a served model takes in one request (`max_batch_size` 16): served parity and `modelship infer`
split them into requests and judge or answer them as one set, over HTTP and gRPC, for a plain model and for its
`_pipeline` ensemble; a candidate that fails (server gone) is that candidate's FAIL row, the others still judged."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import skimage
import torch
from PIL import Image

from modelship.checkpoint.metadata import sidecar_path
from modelship.contract.preprocessing import PreprocessSpec
from modelship.serve.ports import free_port
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.testing.realistic import make_realistic
from tests.checkpoint_factory import make_tinynet
from tests.cli_contract import invoke, snapshot

pytestmark = [pytest.mark.integration, pytest.mark.slow]
TINY = "tests.checkpoint_factory:make_tinynet"
SPEC = PreprocessSpec(resize=72, crop=64, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
DATA = Path(skimage.__file__).parent / "data"
PHOTOS = 40


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 real photos: scikit-image's PNG and JPEG files, then PNGs re-encoded as JPEG."""
    folder = tmp_path_factory.mktemp("photos")
    files = sorted([*DATA.glob("*.png"), *DATA.glob("*.jpg")])
    for path in files:
        (folder / path.name).write_bytes(path.read_bytes())
    for path in files:
        if len(list(folder.iterdir())) == PHOTOS:
            break
        if path.suffix == ".png":
            buffer = io.BytesIO()
            Image.open(path).convert("RGB").save(buffer, "JPEG", quality=90)
            (folder / f"{path.stem}_reencoded.jpg").write_bytes(buffer.getvalue())
    assert len(list(folder.iterdir())) == PHOTOS
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """A real export (export-model's default ONNX path), published with the default max_batch_size, served."""
    root = tmp_path_factory.mktemp("served-batches")
    checkpoint = root / "tiny.pt"
    torch.manual_seed(0)
    torch.save(make_realistic(make_tinynet(), torch.randn(4, 3, 64, 64)).state_dict(), checkpoint)
    sidecar_path(checkpoint).write_text(json.dumps({"preprocess": SPEC.to_dict()}))
    exported = invoke("export", checkpoint, "--arch", TINY, "--onnx", "--input", "x:batch,3,64,64", "--out", root)
    assert exported.exit_code == 0, exported.output
    published = invoke("publish", root / "tiny", "--repo", root / "repo", "--json")
    assert published.exit_code == 0, published.output
    before = snapshot(root / "repo")
    with TritonServer(root / "repo") as server:
        yield root / "tiny", root / "repo", server, before


def parity(export: Path, *args: object) -> tuple[int, dict]:
    result = invoke("parity", export, "--arch", TINY, "--artifact", "onnx", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["tiny_onnx", "tiny_pipeline"])
def test_served_parity_over_more_images_than_max_batch_size(served, photos: Path, model: str, protocol: str) -> None:
    export, repo, server, _ = served
    assert parse_config((repo / model / "config.pbtxt").read_text()).max_batch_size < PHOTOS
    url = server.http_url if protocol == "http" else server.grpc_url
    code, payload = parity(export, "--images", photos, "--served", url, "--served-model", model)
    assert code == 0, payload
    served_report = payload["reports"][-1]
    assert served_report["candidate"] == f"triton:{model}" and served_report["passed"]
    assert served_report["batch_sizes"][-1] == PHOTOS  # judged as one set of 40


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["tiny_onnx", "tiny_pipeline"])
def test_infer_answers_every_image(served, photos: Path, model: str, protocol: str) -> None:
    server = served[2]
    url = server.http_url if protocol == "http" else server.grpc_url
    files = sorted(photos.iterdir())
    result = invoke("infer", *files, "--model", model, "--url", url, "--batch", 64, "--top-k", 1, "--json")
    assert result.exit_code == 0, result.output
    predictions = json.loads(result.stdout)["predictions"]
    assert [p["image"] for p in predictions] == [str(f) for f in files]


def test_a_served_candidate_that_fails_is_its_own_fail_row(served) -> None:
    export = served[0]
    code, payload = parity(export, "--served", f"http://127.0.0.1:{free_port()}", "--served-model", "tiny_onnx")
    assert code == 1
    local, remote = payload["reports"]
    assert local["candidate"] == "onnx" and local["passed"]  # still compared and reported
    assert remote["candidate"] == "triton:tiny_onnx" and not remote["passed"]
    assert "cannot reach a Triton server" in remote["error"]
    assert "1 of 2 failed parity" in payload["error"]


def test_serving_writes_nothing_into_the_repository(served) -> None:
    """The stubs import model.py and the vendored modules from the repository: no __pycache__ appears there."""
    _, repo, server, before = served
    with server.client() as client:
        assert client.ready() and snapshot(repo) == before
