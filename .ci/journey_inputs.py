"""The user's own files for `.ci/journey`, made with the checkout's test environment (a user brings them from their
training): a torchvision classifier, a segmenter trained with its auxiliary head and a detector as plain state_dicts
(random weights made realistic), the real MiniLM sentence-transformers folder, and a photo.

    python .ci/journey_inputs.py FOLDER
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from torchvision import models

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modelship.contract.preprocessing import PreprocessSpec  # noqa: E402
from modelship.preprocess import preprocess_images  # noqa: E402
from modelship.testing.realistic import make_realistic  # noqa: E402
from tests.test_detection import detector_checkpoint  # noqa: E402
from tests.test_segmentation import PHOTOS, segmenter_checkpoint  # noqa: E402
from tests.text_folders import MINILM  # noqa: E402


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    classifier = models.resnet18(weights=None, num_classes=10).train()
    make_realistic(classifier, torch.from_numpy(preprocess_images(PHOTOS, PreprocessSpec())))
    torch.save(classifier.state_dict(), folder / "classifier.pt")
    made = folder / ".made"
    made.mkdir()
    shutil.move(segmenter_checkpoint(made, "deeplabv3_mobilenet_v3_large", aux_loss=True), folder / "segmenter.pt")
    shutil.move(detector_checkpoint(made, "ssdlite320_mobilenet_v3_large"), folder / "detector.pt")
    made.rmdir()
    shutil.copytree(MINILM, folder / "minilm")
    shutil.copy(PHOTOS[1], folder / "photo.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
