"""Hugging Face image models from the folders users save: the preprocessing bit-equal to transformers' own
`AutoImageProcessor` on real photos (PyTorch's uint8 resize reproduced in numpy), `export-model DIR --onnx --fp16` for
a ViT, a ConvNeXt and a SegFormer (keys renamed as transformers renames them), `parity --images` through the
processor itself, the refusals, and model families as a registry (a toy family reached through export-model)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from torchvision.transforms.v2 import functional as F

from modelship.checkpoint.families import ModelFamily, family_of, register_family, unregister_family
from modelship.contract.errors import PreprocessError
from modelship.contract.manifest import Manifest
from modelship.contract.preprocessing import Interpolation, PreprocessSpec
from modelship.preprocess import preprocess_images, to_torchvision, transform
from modelship.preprocess.hf_processor import from_image_processor
from modelship.preprocess.resample import resize_uint8
from modelship.testing.hf_vision import save_vision_folder
from modelship.testing.photos import source_photos
from tests.cli_contract import expect_failure, invoke

PHOTOS = source_photos()
PROCESSORS = [
    ("ViTImageProcessor", {}),
    ("ConvNextImageProcessor", {}),  # 384: warped to a square
    ("ConvNextImageProcessor", {"size": {"shortest_edge": 224}}),  # resized by 1/crop_pct, centre-cropped
    ("SegformerImageProcessor", {}),
    ("DeiTImageProcessor", {}),
    ("BeitImageProcessor", {}),
    ("BitImageProcessor", {}),
    ("MobileViTImageProcessor", {}),  # channels flipped, no normalisation
    ("DetrImageProcessor", {}),  # shortest and longest edge; padded to itself
]


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [Image.open(path).convert("RGB") for path in PHOTOS]


@pytest.mark.parametrize("interpolation", [Interpolation.BILINEAR, Interpolation.BICUBIC])
def test_the_uint8_resize_is_pytorchs_bit_for_bit(photos: list[Image.Image], interpolation: Interpolation) -> None:
    rng = np.random.default_rng(0)
    mode = getattr(F.InterpolationMode, interpolation.name)
    for photo in photos[:4]:
        pixels = np.asarray(photo)
        tensor = torch.from_numpy(pixels.copy()).permute(2, 0, 1)
        sizes = [(224, 224), (37, 501), (pixels.shape[0] * 2 + 1, pixels.shape[1] + 3), rng.integers(20, 900, 2)]
        for height, width in map(lambda size: (int(size[0]), int(size[1])), sizes):
            expected = F.resize(tensor, [height, width], interpolation=mode, antialias=True).permute(1, 2, 0)
            assert np.array_equal(resize_uint8(pixels, height, width, interpolation), expected.numpy())


@pytest.mark.parametrize(("name", "settings"), PROCESSORS, ids=lambda v: str(v) if isinstance(v, str) else None)
@pytest.mark.parametrize("backend", ["torchvision", "pil"])
def test_the_spec_equals_the_processor_on_real_photos(
    name: str, settings: dict, backend: str, photos: list[Image.Image], tmp_path: Path
) -> None:
    """Photo by photo and as one batch, as transformers' AutoImageProcessor makes pixel_values from the saved file:
    equal, or (MobileViT's rescale by multiplication) within one float32 ulp."""
    getattr(transformers, name)(**settings).save_pretrained(tmp_path)
    processor = transformers.AutoImageProcessor.from_pretrained(tmp_path, backend=backend)
    spec = from_image_processor(processor)
    assert spec.resampler == ("torch" if backend == "torchvision" else "pillow")
    ulp = 1 if name.startswith("MobileViT") and backend == "torchvision" else 0
    for photo in photos:
        expected = processor(images=photo, return_tensors="np")["pixel_values"][0]
        _assert_within_ulps(transform(photo, spec), expected, ulp)
        _assert_within_ulps(to_torchvision(spec)(photo).numpy(), expected, ulp)
    batch = processor(images=photos, return_tensors="np")["pixel_values"] if spec.output_hw else None
    if batch is not None:
        _assert_within_ulps(preprocess_images(photos, spec), batch, ulp)


def _assert_within_ulps(actual: np.ndarray, expected: np.ndarray, ulps: int) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    difference = np.abs(actual - expected)
    assert np.all(difference <= ulps * np.spacing(np.abs(expected))), float(difference.max())


def test_what_the_shared_module_cannot_reproduce_is_refused_by_name(tmp_path: Path) -> None:
    transformers.LevitImageProcessor().save_pretrained(tmp_path)
    with pytest.raises(PreprocessError, match=r"LevitImageProcessor: its own resize step"):
        from_image_processor(transformers.AutoImageProcessor.from_pretrained(tmp_path))
    with pytest.raises(PreprocessError, match="pad_size"):
        from_image_processor(transformers.DetrImageProcessor(pad_size={"height": 800, "width": 1333}))
    vit = transformers.ViTImageProcessor(size={"max_height": 224, "max_width": 400})
    with pytest.raises(PreprocessError, match=r"size .*max_height"):
        from_image_processor(vit)
    with pytest.raises(PreprocessError, match="resample 0"):
        from_image_processor(transformers.ViTImageProcessor(resample=0))
    with pytest.raises(PreprocessError, match="torch resampler"):
        PreprocessSpec(interpolation="nearest", resampler="torch")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf_vision")
    return {kind: save_vision_folder(kind, root / kind) for kind in ("vit", "convnext", "segformer", "detr")}


@pytest.fixture(scope="module")
def exports(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each folder through the command of the issue, exactly: export-model DIR --onnx --fp16."""
    out = tmp_path_factory.mktemp("exports")
    for folder in folders.values():
        result = invoke("export", folder, "--onnx", "--fp16", "--out", out, "--json")
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert [a["parity"]["passed"] for a in report["artifacts"]] == [True, True], report
    return {kind: out / kind for kind in folders}


@pytest.mark.slow
def test_each_folder_exports_with_the_processors_preprocessing(
    folders: dict[str, Path], exports: dict[str, Path]
) -> None:
    for kind, folder in folders.items():
        manifest = Manifest.read(exports[kind])
        processor = transformers.AutoImageProcessor.from_pretrained(folder)
        assert manifest.preprocess == from_image_processor(processor), kind
        assert manifest.task == {"segformer": "segmentation", "detr": "detection"}.get(kind, "classification")
        assert manifest.labels[:2] == ["class 0", "class 1"]
    segmenter = Manifest.read(exports["segformer"])
    # the model's own logits (a quarter of the input's size): they go back onto the photo in one resize
    assert segmenter.io.outputs[0].shape == ("batch", 5, "logits_height", "logits_width")
    detector = Manifest.read(exports["detr"])
    assert [t.name for t in detector.io.outputs] == ["boxes", "scores", "labels", "num"]
    assert detector.score_threshold == 0.5 and detector.preprocess.resize_mode == "bounded"


@pytest.mark.slow
def test_keys_are_renamed_as_transformers_renames_them(folders: dict[str, Path]) -> None:
    result = invoke("inspect", folders["vit"], "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    renamed = report["renamed"]["vit.encoder.layer.0.attention.attention.query.weight"]
    assert renamed == "vit.layers.0.attention.q_proj.weight"
    assert any("renamed as transformers renames them" in note for note in report["notes"])


@pytest.mark.slow
def test_parity_images_runs_eager_through_the_processor_itself(exports: dict[str, Path], tmp_path: Path) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    for path in PHOTOS[:4]:
        shutil.copy(path, photos / path.name)
    for kind in ("vit", "segformer", "detr"):
        result = invoke("parity", exports[kind], "--images", photos, "--json")
        assert result.exit_code == 0, result.output
        pipelines = json.loads(result.stdout)["image_pipelines"]
        assert "ImageProcessor" in pipelines["reference"] and pipelines["max_abs"] == 0.0, pipelines


@pytest.mark.heavy
@pytest.mark.integration
def test_the_served_detr_pipeline_is_judged_on_the_photo(exports: dict[str, Path], tmp_path: Path) -> None:
    """The DETR pipeline answers boxes on the photo (its `_postprocess` scales them back); `parity --images
    --served` puts eager's boxes on the photo too, as transformers' `post_process_object_detection(target_sizes=)`
    does, and the served pipeline passes with every box matched."""
    from modelship.serve.server import TritonServer

    photos = tmp_path / "photos"
    photos.mkdir()
    for path in PHOTOS[:2]:
        shutil.copy(path, photos / path.name)
    published = invoke("publish", exports["detr"], "--repo", tmp_path / "repo", "--json")
    assert published.exit_code == 0, published.output
    with TritonServer(tmp_path / "repo") as server:
        served = ("--served", server.grpc_url, "--served-model", "detr_pipeline")
        result = invoke("parity", exports["detr"], "--images", photos, *served, "--json")
    assert result.exit_code == 0, result.output[-2000:]
    (report,) = [r for r in json.loads(result.stdout)["reports"] if r["candidate"] == "triton:detr_pipeline"]
    (boxes,) = report["outputs"]
    assert report["passed"] and boxes["matched"] == boxes["reference_boxes"] > 0, boxes


CONFIDENCE = 30.0  # the classifier's weights scaled: logits as far apart as a trained head's


@pytest.mark.integration
def test_the_served_segformer_mask_is_transformers_own_answer(
    folders: dict[str, Path], exports: dict[str, Path], tmp_path: Path, report_figure: Callable[[str], None]
) -> None:
    """`segformer_pipeline`'s class mask for a real photo equals `post_process_semantic_segmentation(outputs,
    target_sizes=[photo size])` on all but float ties, for heads as initialised (near ties everywhere) and for a
    confident head."""
    from modelship.serve.server import TritonServer

    confident = tmp_path / "confident"
    model = transformers.SegformerForSemanticSegmentation.from_pretrained(folders["segformer"])
    with torch.no_grad():
        model.decode_head.classifier.weight.mul_(CONFIDENCE)
    model.save_pretrained(confident)
    shutil.copy(folders["segformer"] / "preprocessor_config.json", confident)
    made = invoke("export", confident, "--onnx", "--out", tmp_path / "exports", "--json")
    assert made.exit_code == 0, made.output
    repo = tmp_path / "repo"
    for export in (exports["segformer"], tmp_path / "exports" / "confident"):
        assert invoke("publish", export, "--repo", repo).exit_code == 0
    photo = next(p for p in PHOTOS if p.name == "chelsea.png")  # 451 x 300: neither square nor the input size
    with TritonServer(repo) as server, server.client() as client:
        image = np.array([[photo.read_bytes()]], dtype=object)
        served = {
            name: np.asarray(client.infer(f"{name}_pipeline", {"IMAGE": image}, outputs=["MASK"])["MASK"])[0]
            for name in ("segformer", "confident")
        }
    for name, folder in (("segformer", folders["segformer"]), ("confident", confident)):
        expected = _transformers_mask(folder, photo)
        assert served[name].shape == expected.shape
        agreement = float(np.mean(served[name] == expected))
        report_figure(f"served {name} mask vs post_process_semantic_segmentation, {photo.name}: {agreement:.5f}")
        assert agreement >= 0.999, (name, agreement)


def _transformers_mask(folder: Path, photo: Path) -> np.ndarray:
    image = Image.open(photo).convert("RGB")
    processor = transformers.AutoImageProcessor.from_pretrained(folder)
    model = transformers.SegformerForSemanticSegmentation.from_pretrained(folder).eval()
    with torch.no_grad():
        outputs = model(**processor(images=image, return_tensors="pt"))
    (mask,) = processor.post_process_semantic_segmentation(outputs, target_sizes=[image.size[::-1]])
    return mask.numpy()


def test_a_folder_without_its_processor_or_with_custom_code_is_refused(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    bare = shutil.copytree(folders["vit"], tmp_path / "bare")
    (bare / "preprocessor_config.json").unlink()
    expect_failure(["export", bare, "--onnx", "--out", tmp_path / "out"], names=["preprocessor_config.json"])
    custom = shutil.copytree(folders["vit"], tmp_path / "custom")
    config = json.loads((custom / "preprocessor_config.json").read_text())
    (custom / "preprocessor_config.json").write_text(json.dumps(config | {"auto_map": {"AutoImageProcessor": "x.P"}}))
    expect_failure(["export", custom, "--onnx", "--out", tmp_path / "out"], names=["auto_map", "never runs code"],
                   untouched=[custom])  # fmt: skip
    padded = shutil.copytree(folders["vit"], tmp_path / "padded")
    config = json.loads((padded / "preprocessor_config.json").read_text())
    (padded / "preprocessor_config.json").write_text(json.dumps(config | {"resample": 0}))
    expect_failure(["export", padded, "--onnx", "--out", tmp_path / "out"], names=["resample 0"])


@pytest.fixture
def toy_family() -> Iterator[ModelFamily]:
    """A family registered from inside the test: it owns the names `toy/...`, builds them, and knows their
    preprocessing and labels."""
    from tests.checkpoint_factory import make_tinynet

    spec = PreprocessSpec(resize=40, crop=32, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    family = register_family(
        ModelFamily(
            "toy",
            owns=lambda arch: arch.startswith("toy/"),
            canonical=lambda name: name if name == "toy/tiny" else None,
            known=lambda: ["toy/tiny"],
            build=lambda arch: make_tinynet,
            serving_spec=lambda model, arch, checkpoint: spec,
            labels=lambda arch, classes: [f"toy {i}" for i in range(classes)],
        )
    )
    yield family
    unregister_family("toy")


def test_a_registered_family_is_reached_through_export_model(toy_family: ModelFamily, tmp_path: Path) -> None:
    from tests.checkpoint_factory import make_tinynet

    checkpoint = tmp_path / "tiny.pt"
    torch.save(make_tinynet().state_dict(), checkpoint)
    arch = "toy/tiny"
    assert family_of(arch) is toy_family and family_of("resnet50").name == "torchvision"
    result = invoke("export", checkpoint, "--arch", arch, "--onnx", "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    manifest = Manifest.read(tmp_path / "tiny")
    assert manifest.preprocess == toy_family.serving_spec(None, arch, checkpoint)
    assert manifest.labels == ["toy 0", "toy 1", "toy 2"]


def test_a_detector_with_its_own_post_processing_is_refused(folders: dict[str, Path], tmp_path: Path) -> None:
    """Conditional DETR scores with a sigmoid over the top queries and classes: exporting it behind DETR's softmax
    would answer other boxes than its processor does."""
    folder = shutil.copytree(folders["detr"], tmp_path / "conditional")
    config = json.loads((folder / "config.json").read_text())
    renamed = {"model_type": "conditional_detr", "architectures": ["ConditionalDetrForObjectDetection"]}
    (folder / "config.json").write_text(json.dumps(config | renamed))
    expect_failure(
        ["export", folder, "--onnx", "--out", tmp_path / "out"], names=["conditional_detr", "post-processing"]
    )
