"""Each zoo architecture: exported with the real CLI, then `modelship parity` on seeded random batches (1 and 4)
and, for image models, end to end on real photos (training transforms + eager vs manifest spec + artifact)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import PHOTOS, Exports, assert_all_passed
from .zoo import ZooEntry

pytestmark = pytest.mark.slow


def test_zoo_entry(zoo_entry: ZooEntry, zoo_exports: Exports, photos: Path, parity) -> None:
    folder, exported = zoo_exports.get(zoo_entry)
    artifacts = [a["name"] for a in exported["artifacts"]]
    assert sorted(artifacts) == sorted(zoo_entry.formats().split(", "))
    assert exported["source"]["arch"] == zoo_entry.arch
    args = ["--batch-sizes", "1,4"]
    if ":" in zoo_entry.arch:  # project code: the manifest may not name it, the command line does
        args += ["--arch", zoo_entry.arch]
    if zoo_entry.images:
        args += ["--images", str(photos)]
    code, payload = parity(zoo_entry.name, folder, *args)
    assert code == 0, payload.get("error")
    sizes = {1, 4}
    if zoo_entry.images:
        pipelines = payload["image_pipelines"]
        assert pipelines["candidates"] == "preprocess/ with manifest.json preprocess"
        assert pipelines["reference"].startswith(_expected_reference(zoo_entry)), pipelines
        sizes.add(len(PHOTOS))
    assert_all_passed(payload, artifacts, sizes)


def _expected_reference(entry: ZooEntry) -> str:
    if entry.sidecar.get("preprocess"):
        return "the checkpoint's preprocess metadata"
    return "timm create_transform(" if entry.arch.startswith("timm/") else "torchvision "
