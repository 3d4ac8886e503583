"""PreprocessSpec validation and serialisation, image loading (EXIF, errors) and batching."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import skimage
from PIL import Image

from modelship.contract.errors import PreprocessError, UsageError
from modelship.contract.preprocessing import ChannelOrder, CropOffset, Interpolation, Layout, Resampler, ResizeMode
from modelship.preprocess import PreprocessSpec, image_files, load_image, preprocess_images, transform

DATA = Path(skimage.__file__).parent / "data"
EXIF_ORIENTATION = 0x0112


def test_spec_round_trips_through_json(tmp_path) -> None:
    spec = PreprocessSpec(
        resize=(300, 200), resize_mode="exact", crop=(256, 192), interpolation="bicubic", channel_order="BGR"
    )
    assert PreprocessSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    spec.write(tmp_path / "pre.json")
    assert PreprocessSpec.read(tmp_path / "pre.json") == spec
    assert PreprocessSpec.from_dict({}) == PreprocessSpec()
    assert PreprocessSpec(crop=224).crop == (224, 224) and PreprocessSpec(resize=[232]).resize == 232
    assert PreprocessSpec().output_hw == (224, 224) and PreprocessSpec(crop=None).output_hw is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"interpolation": "lanczos3"}, "interpolation 'lanczos3' is not supported"),
        ({"resize_mode": "longer"}, "resize_mode 'longer' is not supported"),
        ({"resampler": "cv2"}, "resampler 'cv2' is not supported"),
        ({"crop_offset": "ceil"}, "crop_offset 'ceil' is not supported"),
        ({"mean": (0.5, 0.5)}, "mean must hold 3 numbers"),
        ({"std": (0.5, 0.0, 0.5)}, "std must be > 0"),
        ({"crop": (224, 0)}, "crop must be an int or"),
        ({"resize": (256, 256)}, "resize must be one int"),
        ({"layout": "CHW"}, "layout 'CHW'"),
        ({"channel_order": "RBG"}, "channel_order 'RBG' is not supported"),
        ({"antialias": False}, "antialias=False is not supported"),
        ({"scale": 0}, "scale must be > 0"),
    ],
)
def test_spec_validation_names_the_field(fields, message) -> None:
    with pytest.raises(PreprocessError, match=message.replace("(", r"\(")):
        PreprocessSpec(**fields)


def test_modes_are_read_from_their_values_and_written_as_them() -> None:
    text = "resize=256x200,crop=192,resize_mode=exact,resampler=torch,crop_offset=floor,interpolation=bicubic,"
    parsed = PreprocessSpec.parse(text + "channel_order=BGR,layout=NHWC")
    data = parsed.to_dict()
    modes = ("resize_mode", "resampler", "crop_offset", "interpolation", "channel_order", "layout")
    for spec in (parsed, PreprocessSpec.from_option(json.dumps(data))):
        assert spec.resize_mode is ResizeMode.EXACT and spec.resampler is Resampler.TORCH
        assert spec.crop_offset is CropOffset.FLOOR and spec.interpolation is Interpolation.BICUBIC
        assert spec.channel_order is ChannelOrder.BGR and spec.layout is Layout.NHWC
    assert [type(data[k]) for k in modes] == [str] * len(modes)
    assert [data[k] for k in modes] == ["exact", "torch", "floor", "bicubic", "BGR", "NHWC"]
    assert PreprocessSpec(resize_mode=ResizeMode.EXACT, resize=8, crop=None) == PreprocessSpec(
        resize_mode="exact", resize=8, crop=None
    )
    assert PreprocessSpec(layout=Layout.NHWC, interpolation="nearest", antialias=False).to_dict() == {
        **PreprocessSpec().to_dict(),
        "layout": "NHWC",
        "interpolation": "nearest",
        "antialias": False,
    }
    with pytest.raises(UsageError, match=r"resampler 'cv2' is not supported \(use one of pillow, torch\)"):
        PreprocessSpec.from_option("resampler=cv2")
    with pytest.raises(UsageError, match=r"layout 'CHW' is not supported \(use one of NCHW, NHWC\)"):
        PreprocessSpec.from_option('{"layout": "CHW"}')
    with pytest.raises(UsageError, match=r"interpolation 'area' is not supported \(use one of bilinear, bicubic"):
        PreprocessSpec.from_option("interpolation=area")


def test_unknown_fields_and_bad_files(tmp_path) -> None:
    with pytest.raises(PreprocessError, match="unknown preprocess field"):
        PreprocessSpec.from_dict({"resize": 256, "crop_size": 224})
    with pytest.raises(PreprocessError, match="not found"):
        PreprocessSpec.read(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mean": [1, 2]}')
    with pytest.raises(PreprocessError, match=r"bad\.json: preprocess mean"):
        PreprocessSpec.read(bad)


def _rotated_jpeg(path: Path, orientation: int) -> np.ndarray:
    """Writes chelsea as a JPEG tagged with an EXIF orientation; returns the stored (unrotated) pixels."""
    image = Image.open(DATA / "chelsea.png").convert("RGB")
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    image.save(path, "JPEG", quality=95, exif=exif.tobytes())
    with Image.open(path) as stored:
        return np.asarray(stored.convert("RGB"))


def test_exif_orientation_is_applied_by_default(tmp_path) -> None:
    path = tmp_path / "rotated.jpg"
    stored = _rotated_jpeg(path, 6)  # 6: the camera was turned; display rotated 90° clockwise
    upright = np.asarray(load_image(path))
    assert upright.shape == (stored.shape[1], stored.shape[0], 3)
    assert np.array_equal(upright, np.rot90(stored, k=-1))
    raw = np.asarray(load_image(path, apply_exif=False))
    assert np.array_equal(raw, stored)  # what torchvision's pil_loader (no exif_transpose) would see
    spec = PreprocessSpec(crop=None)
    assert preprocess_images([path], spec).shape[2:] == (384, 256)  # portrait: int(256 * 451 / 300) after rotation
    no_exif = PreprocessSpec(crop=None, apply_exif=False)
    assert preprocess_images([path], no_exif).shape[2:] == (256, 384)


def test_batch_from_paths_and_images_matches_single_transforms() -> None:
    spec = PreprocessSpec(interpolation="bicubic")
    paths = [DATA / "astronaut.png", DATA / "coffee.png", DATA / "camera.png", DATA / "horse.png"]
    batch = preprocess_images([*paths, Image.open(DATA / "rocket.jpg")], spec)
    assert batch.shape == (5, 3, 224, 224) and batch.dtype == np.float32
    for row, path in zip(batch, paths, strict=False):
        assert np.array_equal(row, transform(load_image(path), spec))


def test_batch_needs_equal_shapes() -> None:
    with pytest.raises(PreprocessError, match="different shapes"):
        preprocess_images([DATA / "astronaut.png", DATA / "coffee.png"], PreprocessSpec(crop=None))
    with pytest.raises(PreprocessError, match="no images"):
        preprocess_images([], PreprocessSpec())


def test_unreadable_images_name_the_file(tmp_path) -> None:
    with pytest.raises(PreprocessError, match=r"multipage_rgb\.tif: not an image Pillow can read"):
        load_image(DATA / "multipage_rgb.tif")
    with pytest.raises(PreprocessError, match=r"nope\.png: image file not found"):
        load_image(tmp_path / "nope.png")
    text = tmp_path / "notes.jpg"
    text.write_text("not a jpeg")
    with pytest.raises(PreprocessError, match=r"notes\.jpg"):
        preprocess_images([DATA / "astronaut.png", text], PreprocessSpec())
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes((DATA / "rocket.jpg").read_bytes()[:3000])
    with pytest.raises(PreprocessError, match=r"truncated\.jpg: cannot decode image"):
        load_image(truncated)
    floating = tmp_path / "float.tif"
    Image.fromarray(np.ones((8, 8), np.float32)).save(floating)
    with pytest.raises(PreprocessError, match=r"float\.tif: floating-point"):
        load_image(floating)


def test_image_files_lists_images_only(tmp_path) -> None:
    for name in ("b.png", "a.JPG", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in image_files(tmp_path)] == ["a.JPG", "b.png"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(PreprocessError, match="no image files"):
        image_files(tmp_path / "empty")
    with pytest.raises(PreprocessError, match="not a folder"):
        image_files(tmp_path / "b.png")


def test_importing_preprocess_does_not_import_torch() -> None:
    code = "import sys, preprocess; preprocess.PreprocessSpec(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_preprocess_takes_inline_json_as_well_as_pairs_and_files(tmp_path) -> None:
    """`--preprocess '{"resize": 256, "crop": 224}'`, as `--input` specs and most CLIs take it: not split on commas."""
    inline = PreprocessSpec.from_option('{"resize": 256, "crop": 224, "mean": [0.5, 0.5, 0.5]}')
    assert inline == PreprocessSpec.from_option("resize=256,crop=224,mean=0.5/0.5/0.5")
    path = tmp_path / "spec.json"
    inline.write(path)
    assert PreprocessSpec.from_option(str(path)) == inline
    with pytest.raises(UsageError, match="not valid JSON"):
        PreprocessSpec.from_option('{"resize": 256')


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("resize=16,crop=64", "crop 64 is larger than the resize 16 (the shorter side)"),
        ("resize=32", "crop 224 is larger than the resize 32"),
        ("resize=40x30,resize_mode=exact,crop=32", "e.g. crop=32x30"),
        ("mean=nan/0.5/0.5", "mean must hold finite numbers"),
        ('{"std": [0.5, 0.5, Infinity]}', "std must hold finite numbers"),
        ("std=0/1/1", "std must be > 0"),
        ("resize=99999", "larger than 16,384 pixels a side"),
    ],
)
def test_a_spec_that_cannot_be_right_is_refused_naming_the_flag(option: str, said: str) -> None:
    """Refused while the flag is read, before any work: a crop larger than the resize (padded with black), a
    mean or std that is not a finite number, a std of 0, a side past any image's."""
    with pytest.raises(UsageError, match=re.escape(said)) as refused:
        PreprocessSpec.from_option(option)
    assert str(refused.value).startswith("--preprocess ") and refused.value.exit_code == 2
