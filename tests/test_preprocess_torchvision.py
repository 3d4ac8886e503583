"""preprocess/ against torchvision and timm themselves, on real photographs: the difference must be exactly zero.

Both pipelines get the same decoded PIL image. torchvision's loaders (`pil_loader`) do `convert("RGB")`; so does
`preprocess.to_rgb` for every mode but 16-bit, which the tests below cover separately.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
import skimage
import torch
from PIL import Image, UnidentifiedImageError
from torchvision import transforms as T
from torchvision.models import ResNet50_Weights, ViT_B_16_Weights

from modelship.preprocess import PreprocessSpec, from_timm, from_torchvision, to_rgb, transform

DATA = Path(skimage.__file__).parent / "data"


def _photos() -> dict[str, Image.Image]:
    """Every image Pillow can open in scikit-image's data folder, plus derived modes and shapes."""
    photos = {}
    for path in sorted(DATA.iterdir()):
        if path.suffix.lower() not in {".png", ".jpg", ".gif", ".tif"}:
            continue
        try:
            with Image.open(path) as image:
                image.load()
                photos[path.name] = image.copy()
        except UnidentifiedImageError:  # multipage_rgb.tif: a TIFF compression Pillow cannot decode
            continue
    chelsea, coffee = photos["chelsea.png"], photos["coffee.png"]
    photos["chelsea_P"] = chelsea.quantize(64)
    photos["coffee_RGBA"] = coffee.convert("RGBA")
    photos["coffee_L"] = coffee.convert("L")
    photos["coffee_tall"] = coffee.crop((100, 0, 250, 400))
    photos["coffee_wide"] = coffee.crop((0, 150, 600, 230))
    photos["coffee_odd"] = coffee.crop((0, 0, 257, 255))
    photos["astronaut_tiny"] = photos["astronaut.png"].resize((37, 53))
    jpeg = io.BytesIO()
    photos["motorcycle_left.png"].save(jpeg, "JPEG", quality=85)
    photos["motorcycle_jpeg"] = Image.open(io.BytesIO(jpeg.getvalue()))
    return photos


PHOTOS = _photos()
MODES_COVERED = {"RGB", "RGBA", "L", "P"}


def _torchvision(image: Image.Image, resize, crop, interpolation: str, mean, std) -> np.ndarray:
    pipeline = T.Compose(
        [
            T.Resize(resize, interpolation=T.InterpolationMode(interpolation)),
            T.CenterCrop(crop),
            T.ToTensor(),
            T.Normalize(mean, std),
        ]
    )
    return pipeline(image.convert("RGB")).numpy()


def test_modes_are_all_covered() -> None:
    assert {image.mode for image in PHOTOS.values()} >= MODES_COVERED
    assert len(PHOTOS) >= 30


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "nearest"])
def test_resize_crop_normalize_equals_torchvision_exactly(interpolation: str, report_figure) -> None:
    spec = PreprocessSpec(resize=256, crop=224, interpolation=interpolation)
    worst, start = 0.0, time.perf_counter()
    for name, image in PHOTOS.items():
        ours = transform(image, spec)
        theirs = _torchvision(image, 256, 224, interpolation, spec.mean, spec.std)
        assert ours.shape == theirs.shape == (3, 224, 224), name
        assert ours.dtype == np.float32
        worst = max(worst, float(np.abs(ours - theirs).max()))
        assert np.array_equal(ours, theirs), (
            f"{name} ({image.mode} {image.size}): max diff {np.abs(ours - theirs).max()}"
        )
    per_image_ms = (time.perf_counter() - start) / len(PHOTOS) * 1000
    report_figure(
        f"preprocess {interpolation}: {len(PHOTOS)} images, max |ours - torchvision| = {worst}, "
        f"{per_image_ms:.1f} ms/image (both pipelines)"
    )


def test_crop_larger_than_image_pads_like_torchvision() -> None:
    image = PHOTOS["astronaut_tiny"]
    spec = PreprocessSpec(resize=None, crop=(64, 45))
    theirs = T.Compose([T.CenterCrop((64, 45)), T.ToTensor(), T.Normalize(spec.mean, spec.std)])(image).numpy()
    assert np.array_equal(transform(image, spec), theirs)


def test_exact_resize_equals_torchvision() -> None:
    spec = PreprocessSpec(resize=(240, 200), resize_mode="exact", crop=(224, 192), interpolation="bicubic")
    for name in ("coffee.png", "coffee_tall", "horse.png"):
        theirs = _torchvision(PHOTOS[name], (240, 200), (224, 192), "bicubic", spec.mean, spec.std)
        assert np.array_equal(transform(PHOTOS[name], spec), theirs), name


@pytest.mark.parametrize("weights", [ResNet50_Weights.IMAGENET1K_V2, ViT_B_16_Weights.IMAGENET1K_V1])
def test_torchvision_weights_presets(weights) -> None:
    spec = from_torchvision(weights)
    preset = weights.transforms()
    assert spec.resize == preset.resize_size[0] and spec.crop == (preset.crop_size[0],) * 2
    for name in ("chelsea.png", "coffee_tall", "logo.png", "camera.png"):
        image = PHOTOS[name]
        assert np.array_equal(transform(image, spec), preset(image.convert("RGB")).numpy()), name


@pytest.mark.parametrize("model_name", ["resnet50", "vit_tiny_patch16_224", "efficientnet_b0", "convnext_atto"])
def test_timm_specs_equal_timm_create_transform(model_name: str) -> None:
    from timm.data import create_transform, resolve_data_config
    from timm.models import get_pretrained_cfg

    config = resolve_data_config(pretrained_cfg=get_pretrained_cfg(model_name).to_dict())
    spec = from_timm(model_name)
    pipeline = create_transform(**config, is_training=False)
    for name in ("chelsea.png", "coffee_wide", "horse.png", "coins.png"):
        image = PHOTOS[name].convert("RGB")
        diff = np.abs(transform(image, spec) - pipeline(image).numpy()).max()
        assert diff == 0.0, f"{model_name} on {name}: max diff {diff}"


def test_timm_squash_mode() -> None:
    from timm.data import create_transform

    config = {"input_size": (3, 224, 224), "interpolation": "bicubic", "crop_pct": 0.9, "crop_mode": "squash"}
    config |= {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    spec = from_timm(config)
    assert spec.resize_mode == "exact" and spec.resize == (248, 248)
    image = PHOTOS["coffee.png"]
    assert np.array_equal(transform(image, spec), create_transform(**config, is_training=False)(image).numpy())


def test_sixteen_bit_images_are_scaled_not_clipped() -> None:
    camera = np.asarray(PHOTOS["camera.png"])
    buffer = io.BytesIO()
    Image.fromarray(camera.astype(np.uint16) * 257).save(buffer, "PNG")
    sixteen = Image.open(io.BytesIO(buffer.getvalue()))
    assert sixteen.mode.startswith("I")
    assert np.array_equal(np.asarray(to_rgb(sixteen))[..., 0], camera)
    assert (np.asarray(sixteen.convert("RGB")) == 255).mean() > 0.9  # Pillow's own convert clips at 255
    spec = PreprocessSpec()
    expected = _torchvision(PHOTOS["camera.png"], 256, 224, "bilinear", spec.mean, spec.std)
    assert np.array_equal(transform(sixteen, spec), expected)


def test_output_variants_follow_the_spec() -> None:
    image = PHOTOS["chelsea.png"]
    base = transform(image, PreprocessSpec())
    nhwc_bgr = transform(image, PreprocessSpec(layout="NHWC", channel_order="BGR"))
    assert np.array_equal(nhwc_bgr, base.transpose(1, 2, 0)[..., ::-1])
    half = transform(image, PreprocessSpec(dtype="float16"))
    assert half.dtype == np.float16 and np.array_equal(half, base.astype(np.float16))
    raw = transform(image, PreprocessSpec(mean=(0, 0, 0), std=(1, 1, 1), scale=1.0))
    pixels = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])(image).to(torch.float32).numpy()
    assert np.array_equal(raw, pixels)


def test_a_model_familys_serving_spec_is_its_own_config() -> None:
    import timm
    import torchvision

    from modelship.checkpoint.families import family_of

    def spec(model: object, arch: str) -> PreprocessSpec | None:
        return family_of(arch).serving_spec(model, arch, Path("ckpt.pt"))

    assert spec(None, "resnet50") == from_torchvision(ResNet50_Weights.DEFAULT)
    timm_model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    assert spec(timm_model, "timm/vit_tiny_patch16_224").mean == (0.5, 0.5, 0.5)
    assert spec(torchvision.models.resnet18(), "mypkg.models:Net") is None
