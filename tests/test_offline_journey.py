"""The whole journey with no network at all: export-model, publish, serve and infer, each run as a user runs it (the
README's commands, default ports), inside a new network namespace whose only interface is loopback (`unshare -n`,
then `ip link set lo up`). Any outbound connection (a hub or backbone-weights download, a name lookup) fails at
once, so passing proves that no step opens one. A detector and a segmenter, and Hugging Face folders of a ViT, a
ConvNeXt, a SegFormer and a DETR (their image processor's preprocessing), each through its `_pipeline`; the DETR's
boxes on the photo are those transformers' own `post_process_object_detection` gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from modelship.testing.hf_vision import save_vision_folder
from tests.test_detection import detector_checkpoint
from tests.test_segmentation import PHOTOS, segmenter_checkpoint

JOURNEY = r"""
set -eu
ip link set lo up
export-model det.pt --json > export-det.json
export-model seg.pt --json > export-seg.json
export-model vit --onnx --fp16 --json > export-vit.json
export-model convnext --onnx --fp16 --json > export-convnext.json
export-model segformer --onnx --fp16 --json > export-segformer.json
export-model detr --onnx --fp16 --json > export-detr.json
for name in det seg vit convnext segformer detr; do modelship publish exports/$name --json > publish-$name.json; done
modelship serve > serve.log 2>&1 &
SERVER=$!
for _ in $(seq 180); do
  python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=1)" \
    2>/dev/null && break
  sleep 1
done
modelship infer photo.png --model det_pipeline --min-score 0 --json > infer-det.json
modelship infer photo.png --model seg_pipeline --json > infer-seg.json
modelship infer photo.png --model vit_pipeline --json > infer-vit.json
modelship infer photo.png --model convnext_pipeline --json > infer-convnext.json
modelship infer photo.png --model segformer_pipeline --json > infer-segformer.json
modelship infer photo.png --model detr_pipeline --min-score 0 --json > infer-detr.json
kill -INT "$SERVER"
wait "$SERVER" || true
python -c "import urllib.request; urllib.request.urlopen('https://download.pytorch.org', timeout=5)" \
  2> outbound.txt || echo refused >> outbound.txt
"""


def test_export_publish_serve_infer_open_no_outbound_connection(tmp_path: Path) -> None:
    shutil.copy(detector_checkpoint(tmp_path, "ssdlite320_mobilenet_v3_large"), tmp_path / "det.pt")
    shutil.copy(segmenter_checkpoint(tmp_path, "lraspp_mobilenet_v3_large"), tmp_path / "seg.pt")
    shutil.copy(PHOTOS[1], tmp_path / "photo.png")
    for kind in ("vit", "convnext", "segformer", "detr"):
        save_vision_folder(kind, tmp_path / kind)
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["unshare", "-n", "bash", "-c", JOURNEY], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=1500)  # fmt: skip
    log = (tmp_path / "serve.log").read_text() if (tmp_path / "serve.log").exists() else ""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:] + log[-2000:]
    assert "refused" in (tmp_path / "outbound.txt").read_text()  # the namespace really has no way out
    for step in ("export", "publish"):
        for name in ("det", "seg", "vit", "convnext", "segformer", "detr"):
            assert json.loads((tmp_path / f"{step}-{name}.json").read_text())["ok"], (step, name)
    (found,) = json.loads((tmp_path / "infer-det.json").read_text())["detections"]
    assert found["size"] == [400, 600] and len(found["detections"]) == 300
    (segmented,) = json.loads((tmp_path / "infer-seg.json").read_text())["segmentations"]
    assert segmented["size"] == [400, 600] and sum(c["share"] for c in segmented["classes"]) > 0.999
    for name in ("vit", "convnext"):
        (classified,) = json.loads((tmp_path / f"infer-{name}.json").read_text())["predictions"]
        assert classified["top_k"][0]["label"].startswith("class "), name
    (segformed,) = json.loads((tmp_path / "infer-segformer.json").read_text())["segmentations"]
    assert segformed["size"] == [400, 600] and sum(c["share"] for c in segformed["classes"]) > 0.999
    (found,) = json.loads((tmp_path / "infer-detr.json").read_text())["detections"]
    expected = detr_answer(tmp_path / "detr", tmp_path / "photo.png")
    served = sorted((d["score"], d["index"], d["box"]) for d in found["detections"])
    assert len(served) == len(expected) > 0
    for (score, label, box), (want_score, want_label, want_box) in zip(served, expected, strict=True):
        assert label == want_label and abs(score - want_score) < 1e-4
        assert np.allclose(box, want_box, atol=1e-2), (box, want_box)


def detr_answer(folder: Path, photo: Path) -> list[tuple[float, int, list[float]]]:
    """transformers' own answer: the folder's processor, its model, post_process_object_detection at the photo's
    size with the threshold the export keeps."""
    import torch
    import transformers
    from PIL import Image

    image = Image.open(photo).convert("RGB")
    processor = transformers.AutoImageProcessor.from_pretrained(folder)
    model = transformers.DetrForObjectDetection.from_pretrained(folder).eval()
    with torch.no_grad():
        answer = model(**processor(images=image, return_tensors="pt"))
    (found,) = processor.post_process_object_detection(answer, threshold=0.5, target_sizes=[image.size[::-1]])
    rows = zip(found["scores"].tolist(), found["labels"].tolist(), found["boxes"].tolist(), strict=True)
    return sorted((score, label, box) for score, label, box in rows)
