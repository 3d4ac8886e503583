"""The whole journey as a user runs it: modelship installed from its wheel (tests/installed.py: not the checkout,
not editable), every command run from an empty folder of the user's own (the server too), with no network at all:
export-model, publish, serve and infer (the README's commands, default ports), inside a new network namespace whose
only interface is loopback (`unshare -n`, then `ip link set lo up`). Any outbound connection (a hub or
backbone-weights download, a name lookup) fails at once, so passing proves that no step opens one.

Every Python model modelship writes loads there and answers through its `_pipeline`: `_preprocess` and the local
`onnxruntime` / `pytorch` backends (every image model), `_postprocess` (a segmenter's class mask; a DETR's boxes put
back on the photo) and `_tokenize` (a text classifier). The models: a torchvision detector, a torchvision segmenter
trained with its auxiliary head (`--arch` alone, TorchScript and ONNX), Hugging Face folders of a ViT, a ConvNeXt, a
SegFormer and a DETR (their image processor's preprocessing) and a BERT text classifier; the DETR's boxes on the
photo are those transformers' own `post_process_object_detection` gives."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

from modelship.testing.hf_vision import save_vision_folder
from tests.installed import installed_modelship
from tests.test_detection import detector_checkpoint
from tests.test_segmentation import PHOTOS, segmenter_checkpoint
from tests.text_folders import SENTIMENT, save_classifier

JOURNEY = r"""
set -eu
ip link set lo up
python -c "import modelship; print(modelship.__file__)" > where.txt
export-model det.pt --json > export-det.json
export-model seg.pt --arch deeplabv3_mobilenet_v3_large --torchscript --onnx --json > export-seg.json
export-model text --json > export-text.json
export-model vit --onnx --fp16 --json > export-vit.json
export-model convnext --onnx --fp16 --json > export-convnext.json
export-model segformer --onnx --fp16 --json > export-segformer.json
export-model detr --onnx --fp16 --json > export-detr.json
for name in det seg text vit convnext segformer detr; do
  modelship publish exports/$name --json > publish-$name.json
done
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
modelship infer --text "a fine day" --text "nothing works" --model text_pipeline --protocol grpc --json \
  > infer-text.json
kill -INT "$SERVER"
wait "$SERVER" || true
python -c "import urllib.request; urllib.request.urlopen('https://download.pytorch.org', timeout=5)" \
  2> outbound.txt || echo refused >> outbound.txt
"""


def test_export_publish_serve_infer_open_no_outbound_connection(tmp_path: Path) -> None:
    shutil.copy(detector_checkpoint(tmp_path, "ssdlite320_mobilenet_v3_large"), tmp_path / "det.pt")
    shutil.copy(segmenter_checkpoint(tmp_path, "deeplabv3_mobilenet_v3_large", aux_loss=True), tmp_path / "seg.pt")
    save_classifier(tmp_path / "text")
    shutil.copy(PHOTOS[1], tmp_path / "photo.png")
    for kind in ("vit", "convnext", "segformer", "detr"):
        save_vision_folder(kind, tmp_path / kind)
    installed = installed_modelship()
    done = subprocess.run(["unshare", "-n", "bash", "-c", JOURNEY], cwd=tmp_path, env=installed.env(),
                          capture_output=True, text=True, timeout=1500)  # fmt: skip
    log = (tmp_path / "serve.log").read_text() if (tmp_path / "serve.log").exists() else ""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:] + log[-2000:]
    assert "refused" in (tmp_path / "outbound.txt").read_text()  # the namespace really has no way out
    assert Path((tmp_path / "where.txt").read_text().strip()).is_relative_to(installed.venv)
    for step in ("export", "publish"):
        for name in ("det", "seg", "text", "vit", "convnext", "segformer", "detr"):
            assert json.loads((tmp_path / f"{step}-{name}.json").read_text())["ok"], (step, name)
    (found,) = json.loads((tmp_path / "infer-det.json").read_text())["detections"]
    assert found["size"] == [400, 600] and len(found["detections"]) == 300
    (segmented,) = json.loads((tmp_path / "infer-seg.json").read_text())["segmentations"]
    assert segmented["size"] == [400, 600] and sum(c["share"] for c in segmented["classes"]) > 0.999
    exported = json.loads((tmp_path / "export-seg.json").read_text())
    assert [a["name"] for a in exported["artifacts"]] == ["torchscript", "onnx"]
    assert exported["source"]["arch_kwargs"] == {"aux_loss": True, "num_classes": 4}  # read off the weights
    texts = json.loads((tmp_path / "infer-text.json").read_text())
    assert texts["texts"] == ["a fine day", "nothing works"]
    assert all(ranked[0]["label"] in SENTIMENT for ranked in texts["top_k"])
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
