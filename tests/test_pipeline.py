"""Server-side preprocessing (serve.pipeline) through a real tritonserver: `publish` writes `<name>_preprocess` and
the ensemble `<name>_pipeline`; encoded photos in every common form preprocess on the server bit for bit like
torchvision's training transforms; curl alone classifies a photo; bad bytes fail only their own request."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import skimage
import torchvision.transforms as T
import tritonclient.http as httpclient
from PIL import Image, ImageOps
from serve_exports import LABELS, PREPROCESS, write_export
from tritonclient.utils import InferenceServerException

from modelship.preprocess import decode_image, preprocess_images
from modelship.serve.image_pipeline import IMAGE, PIXELS, curl_example
from modelship.serve.publish import publish_export
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import ServingOptions, parse_config
from tests.cli_contract import invoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DATA = Path(skimage.__file__).parent / "data"
MAX_PIXELS = 4_000_000


def encoded_photos() -> dict[str, bytes]:
    """Real photos as a client would send them: the files themselves, and re-encoded as JPEG, WebP, 16-bit PNG,
    grayscale, RGBA and an EXIF-rotated JPEG."""
    photos = {p.name: p.read_bytes() for p in sorted(DATA.glob("*.png"))[:12]}
    photos.update({p.name: p.read_bytes() for p in sorted(DATA.glob("*.jpg"))})
    coffee = Image.open(DATA / "coffee.png").convert("RGB")

    def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
        buffer = io.BytesIO()
        image.save(buffer, fmt, **options)
        return buffer.getvalue()

    photos["coffee.jpg"] = encode(coffee, "JPEG", quality=90)
    photos["coffee.webp"] = encode(coffee, "WEBP", quality=90)
    photos["coffee_gray.png"] = encode(coffee.convert("L"), "PNG")
    photos["coffee_rgba.png"] = encode(coffee.convert("RGBA"), "PNG")
    gray16 = (np.asarray(coffee.convert("L"), dtype=np.uint16) * 257).astype(np.uint16)
    photos["coffee_16bit.png"] = encode(Image.fromarray(gray16), "PNG")
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to display
    photos["coffee_exif.jpg"] = encode(coffee, "JPEG", quality=90, exif=exif.tobytes())
    return photos


PHOTOS = encoded_photos()


def torchvision_reference(data: bytes) -> np.ndarray:
    """The training side: Pillow decodes (EXIF orientation applied, as the spec says), torchvision transforms."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    if image.mode.startswith("I"):  # 16-bit: scaled to 8 bits as preprocess.to_rgb documents
        image = Image.fromarray(np.rint(np.asarray(image, dtype=np.float64) / 257.0).astype(np.uint8))
    resize, crop = T.Resize(PREPROCESS.resize), T.CenterCrop(PREPROCESS.crop)
    pipeline = T.Compose([resize, crop, T.ToTensor(), T.Normalize(PREPROCESS.mean, PREPROCESS.std)])
    return pipeline(image.convert("RGB")).numpy()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pipeline")
    export = write_export(root / "tiny")
    serving = ServingOptions(max_image_pixels=MAX_PIXELS, max_queue_delay_us=50_000)  # requests surely batch
    publish_export(export, root / "repo", artifacts=["onnx"], serving=serving)
    return export, root / "repo"


@pytest.fixture(scope="module")
def server(published: tuple[Path, Path]):
    with TritonServer(published[1]) as triton:
        yield triton


@pytest.fixture(scope="module")
def client(server: TritonServer) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(server.http_url.split("://", 1)[1], concurrency=8)


def encoded(*items: bytes) -> httpclient.InferInput:
    tensor = httpclient.InferInput(IMAGE, [len(items), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[item] for item in items], dtype=object))
    return tensor


def test_publish_writes_the_preprocess_model_and_the_ensemble(published: tuple[Path, Path]) -> None:
    repo = published[1]
    assert sorted(p.name for p in repo.iterdir()) == ["tiny_onnx", "tiny_pipeline", "tiny_preprocess"]
    pre = parse_config((repo / "tiny_preprocess" / "config.pbtxt").read_text())
    assert pre.backend == "python" and pre.input[0].name == IMAGE and list(pre.output[0].dims) == [3, 16, 16]
    assert pre.parameters["max_pixels"].string_value == str(MAX_PIXELS)
    version = repo / "tiny_preprocess" / "1"
    assert (version / "model.py").is_file() and (version / "modelship" / "preprocess" / "image.py").is_file()
    assert json.loads((version / "preprocess.json").read_text()) == PREPROCESS.to_dict()
    assert (repo / "tiny_preprocess" / "warmup" / IMAGE).stat().st_size > 100  # a real JPEG
    pipe = parse_config((repo / "tiny_pipeline" / "config.pbtxt").read_text())
    steps = [(s.model_name, dict(s.input_map), dict(s.output_map)) for s in pipe.ensemble_scheduling.step]
    assert steps == [
        ("tiny_preprocess", {IMAGE: IMAGE}, {PIXELS: "pixels"}),
        ("tiny_onnx", {"image": "pixels"}, {"output": "output"}),
    ]
    assert pipe.output[0].label_filename == "labels.txt" and (repo / "tiny_pipeline" / "1").is_dir()


def test_server_side_preprocessing_equals_torchvision_bit_for_bit(client, report_figure) -> None:
    names = list(PHOTOS)
    chunks = [names[i : i + 8] for i in range(0, len(names), 8)]
    pixels = np.concatenate(
        [client.infer("tiny_preprocess", [encoded(*(PHOTOS[n] for n in chunk))]).as_numpy(PIXELS) for chunk in chunks]
    )
    for name, served in zip(names, pixels, strict=True):
        reference = torchvision_reference(PHOTOS[name])
        assert np.array_equal(served, reference), f"{name}: max diff {np.abs(served - reference).max()}"
    report_figure(f"server-side preprocessing: {len(names)} encoded photos equal torchvision's transforms bit for bit")


def test_the_pipeline_answers_as_the_model_on_client_side_preprocessing(client) -> None:
    photos = [PHOTOS["chelsea.png"], PHOTOS["coffee_exif.jpg"]]
    served = client.infer("tiny_pipeline", [encoded(*photos)]).as_numpy("output")
    images = [decode_image(p) for p in photos]
    tensor = httpclient.InferInput("image", [2, 3, 16, 16], "FP32")
    tensor.set_data_from_numpy(preprocess_images(images, PREPROCESS))
    direct = client.infer("tiny_onnx", [tensor]).as_numpy("output")
    np.testing.assert_array_equal(served, direct)


def test_curl_alone_classifies_a_photo(server: TritonServer, tmp_path: Path) -> None:
    photo = tmp_path / "chelsea.jpg"
    photo.write_bytes(PHOTOS["chelsea.jpg"] if "chelsea.jpg" in PHOTOS else PHOTOS["coffee.jpg"])
    script = curl_example(server.http_url, "tiny_pipeline", str(photo), "output", classes=3)
    answer = json.loads(subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout)
    classes = answer["outputs"][0]["data"]
    assert len(classes) == 3 and all(c.split(":")[2] in LABELS for c in classes)


def test_modelship_infer_sends_the_encoded_files(server: TritonServer, tmp_path: Path) -> None:
    photo = tmp_path / "coffee.webp"
    photo.write_bytes(PHOTOS["coffee.webp"])
    result = invoke("infer", photo, "--model", "tiny_pipeline", "--url", server.grpc_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["predictions"][0]["top_k"][0]["label"] in LABELS


def _truncated() -> bytes:
    return PHOTOS["coffee.jpg"][: len(PHOTOS["coffee.jpg"]) // 3]


def _bomb() -> bytes:
    buffer = io.BytesIO()
    Image.new("L", (4000, 2000)).save(buffer, "PNG")  # 8 M pixels of zeros: a few KB of PNG
    return buffer.getvalue()


BAD = {
    "not an image": (b"this is text, not an image", "not an image"),
    "truncated": (_truncated(), "truncated or corrupt"),
    "decompression bomb": (_bomb(), "over the limit of 4000000"),
    "zero bytes": (b"", "0 bytes"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_bytes_get_an_error_naming_the_cause(client, case: str) -> None:
    data, needle = BAD[case]
    with pytest.raises(InferenceServerException, match=needle):
        client.infer("tiny_pipeline", [encoded(data)])


def test_a_bad_request_fails_alone_in_a_dynamic_batch(client) -> None:
    requests = [PHOTOS["chelsea.png"], b"junk", PHOTOS["coffee.jpg"], _truncated(), PHOTOS["coffee.webp"]] * 3
    before = _executions(client)
    pending = [client.async_infer("tiny_pipeline", [encoded(data)]) for data in requests]
    outcomes = []
    for request in pending:
        try:
            request.get_result()
            outcomes.append("ok")
        except InferenceServerException:
            outcomes.append("error")
    assert outcomes == ["ok", "error", "ok", "error", "ok"] * 3
    executions, inferences = (now - then for now, then in zip(_executions(client), before, strict=True))
    assert inferences == len(requests) and executions < inferences  # requests were batched together


def _executions(client) -> tuple[int, int]:
    stats = client.get_inference_statistics("tiny_preprocess")["model_stats"][0]
    return stats["execution_count"], stats["inference_count"]


def test_wrong_dtype_and_empty_input_are_refused(client) -> None:
    floats = httpclient.InferInput(IMAGE, [1, 1], "FP32")
    floats.set_data_from_numpy(np.zeros((1, 1), np.float32))
    with pytest.raises(InferenceServerException, match="data-type is 'FP32'"):
        client.infer("tiny_pipeline", [floats])
    empty = httpclient.InferInput(IMAGE, [0, 1], "BYTES")
    empty.set_data_from_numpy(np.zeros((0, 1), dtype=object))
    with pytest.raises(InferenceServerException):
        client.infer("tiny_pipeline", [empty])


def test_publish_prints_what_the_stock_container_needs(published: tuple[Path, Path], tmp_path: Path) -> None:
    result = invoke("publish", published[0], "--repo", tmp_path / "repo", "--artifact", "onnx")
    assert result.exit_code == 0, result.output
    assert "FROM nvcr.io/nvidia/tritonserver:" in result.stdout and "RUN pip install" in result.stdout
    bare = invoke("publish", published[0], "--repo", tmp_path / "bare", "--pipeline-artifact", "none", "--json")
    assert [m["name"] for m in json.loads(bare.stdout)["models"]] == [
        "tiny_torchscript", "tiny_torchscript_fp16", "tiny_onnx", "tiny_onnx_fp16",
    ]  # fmt: skip
    refused = invoke("publish", published[0], "--repo", tmp_path / "r", "--artifact", "torchscript",
                     "--pipeline-artifact", "onnx", "--json")  # fmt: skip
    assert refused.exit_code == 1 and "not being published" in json.loads(refused.stdout)["error"]
    assert not (tmp_path / "r").exists()
