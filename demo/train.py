"""Train DigitsNet on scikit-learn's bundled 8x8 digits and save it the way training code saves a checkpoint.

Images go through the project's one preprocessing implementation (`preprocess.image`) with the spec stored in the
checkpoint, so training, export verification and the Triton client all see identical pixels. Held-out digits are
written as 8x8 PNGs: the client resizes them exactly as training did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from modelship.contract.errors import UsageError
from modelship.contract.preprocessing import PreprocessSpec, ResizeMode
from modelship.demo.model import IMAGE_SIZE, DigitsNet
from modelship.preprocess.image import preprocess_images

ARCH = "modelship.demo.model:DigitsNet"
LABELS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
SPEC = PreprocessSpec(
    resize=(IMAGE_SIZE, IMAGE_SIZE),
    resize_mode=ResizeMode.EXACT,
    crop=None,
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
)


@dataclass
class Trained:
    model: DigitsNet
    optimizer: torch.optim.Optimizer
    epochs: int
    accuracy: float  # held-out
    test_images: list[Image.Image]
    test_labels: np.ndarray


def digit_image(pixels: np.ndarray) -> Image.Image:
    """An 8x8 digit (values 0..16) as an 8-bit grayscale image."""
    return Image.fromarray(np.rint(pixels.reshape(8, 8) * (255 / 16)).astype(np.uint8), mode="L")


def accuracy(model: nn.Module, batch: np.ndarray, labels: np.ndarray) -> float:
    model.eval()
    with torch.inference_mode():
        predicted = model(torch.from_numpy(batch)).argmax(dim=1).numpy()
    return float((predicted == labels).mean())


def train(epochs: int = 6, seed: int = 0, batch_size: int = 32, lr: float = 3e-3) -> Trained:
    """AdamW with a one-cycle schedule, on one thread: small convolutions train about 10x faster single-threaded
    here than with two threads fighting over two busy cores."""
    try:  # the demo extra: modelship itself needs no scikit-learn
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        raise UsageError(
            "the demo trains on scikit-learn's bundled digits, and scikit-learn is not installed",
            hint="pip install 'modelship[demo]'",
        ) from None
    digits = load_digits()
    images = [digit_image(row) for row in digits.data]
    train_idx, test_idx = train_test_split(
        np.arange(len(images)), test_size=0.2, random_state=seed, stratify=digits.target
    )
    x_train = preprocess_images([images[i] for i in train_idx], SPEC)
    y_train = torch.from_numpy(digits.target[train_idx])
    x_test, y_test = preprocess_images([images[i] for i in test_idx], SPEC), digits.target[test_idx]
    torch.manual_seed(seed)
    model = DigitsNet(num_classes=len(LABELS))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    inputs = torch.from_numpy(x_train)
    steps = epochs * -(-len(inputs) // batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            model.train()
            for batch in torch.randperm(len(inputs)).split(batch_size):
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(inputs[batch]), y_train[batch]).backward()
                optimizer.step()
                schedule.step()
    finally:
        torch.set_num_threads(threads)
    return Trained(
        model.eval(), optimizer, epochs, accuracy(model, x_test, y_test), [images[i] for i in test_idx], y_test
    )


def save_checkpoint(trained: Trained, path: Path) -> Path:
    """{state_dict, optimizer, epoch} plus the metadata export-model reads: arch_kwargs, io, preprocess, labels.

    The architecture is not stored: it is project code (`ARCH`), and only the command line may name code to
    import (`export-model --arch modelship.demo.model:DigitsNet`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": trained.model.state_dict(),
            "optimizer": trained.optimizer.state_dict(),
            "epoch": trained.epochs,
            "arch_kwargs": {"num_classes": len(LABELS)},
            "io": {"inputs": [{"name": "image", "shape": ["batch", 3, IMAGE_SIZE, IMAGE_SIZE], "dtype": "float32"}]},
            "preprocess": SPEC.to_dict(),
            "labels": LABELS,
            "val_accuracy": trained.accuracy,
        },
        path,
    )
    return path


def write_samples(trained: Trained, folder: Path, count: int = 20) -> list[tuple[Path, int]]:
    """The first `count` held-out digits as PNGs named `NN_<label>.png`; returns (path, true class) pairs."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for i, (image, label) in enumerate(zip(trained.test_images[:count], trained.test_labels[:count], strict=True)):
        path = folder / f"{i:02d}_{LABELS[label]}.png"
        image.save(path)
        samples.append((path, int(label)))
    return samples
