"""One model of every torchvision segmentation and detection family, each from a plain state_dict exported with no
network at all, judged as masks or matched boxes. The mobile members (lraspp, ssdlite, Faster R-CNN MobileNet) run
in `make test` (test_segmentation.py, test_detection.py); these ResNet/VGG ones take minutes each on two cores, so
they are `heavy`, and verify at batch sizes 1 and 2 (the default 1 and 7 is the same check, three times longer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelship.contract.manifest import Manifest
from tests.test_detection import detector_checkpoint
from tests.test_segmentation import EXPORT_MODEL, offline, segmenter_checkpoint

pytestmark = pytest.mark.heavy
DETECTORS = (
    "fasterrcnn_resnet50_fpn",
    "fcos_resnet50_fpn",
    "retinanet_resnet50_fpn",
    "ssd300_vgg16",
    "maskrcnn_resnet50_fpn",
    "keypointrcnn_resnet50_fpn",
)
SEGMENTERS = ("fcn_resnet50", "deeplabv3_resnet50")


def _export(root: Path, checkpoint: Path) -> Manifest:
    result = offline(*EXPORT_MODEL, checkpoint, "--out", root / "exports", "--batch-sizes", "1,2", "--json", cwd=root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    payload = json.loads(result.stdout)
    return Manifest.read(root / "exports" / payload["name"])


@pytest.mark.parametrize("arch", DETECTORS)
def test_every_detection_family_exports_and_matches_its_boxes(arch: str, tmp_path: Path) -> None:
    manifest = _export(tmp_path, detector_checkpoint(tmp_path, arch))
    assert manifest.source.arch == arch and manifest.task == "detection"
    outputs = [t.name for t in manifest.io.outputs]
    assert outputs[:3] == ["boxes", "scores", "labels"] and outputs[-1] == "num"
    assert ("masks" in outputs) == arch.startswith("maskrcnn") and ("keypoints" in outputs) == arch.startswith("key")
    for artifact in manifest.artifacts:
        (boxes,) = artifact.parity.outputs
        assert artifact.parity.passed and boxes.matched >= 0.9 * boxes.reference_boxes > 0, (artifact.name, boxes)
        assert (boxes.mask_iou is not None) == arch.startswith("maskrcnn")
        assert (boxes.keypoint_diff is not None) == arch.startswith("key")


@pytest.mark.parametrize("arch", SEGMENTERS)
def test_every_segmentation_family_exports_and_agrees_on_its_masks(arch: str, tmp_path: Path) -> None:
    manifest = _export(tmp_path, segmenter_checkpoint(tmp_path, arch, aux_loss=True))
    assert manifest.source.arch == arch and manifest.source.arch_kwargs == {"aux_loss": True, "num_classes": 4}
    assert manifest.task == "segmentation" and [t.name for t in manifest.io.outputs] == ["out"]
    for artifact in manifest.artifacts:
        (mask,) = artifact.parity.outputs
        assert artifact.parity.passed and mask.kind == "mask" and mask.pixels > 0, (artifact.name, mask)
