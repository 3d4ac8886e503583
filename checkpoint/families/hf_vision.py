"""Hugging Face image models behind modelship's image interface: `pixel_values` ([batch, 3, height, width], as the
folder's image processor makes them) in; `logits` out.

- Image classification: the head's logits, [batch, labels].
- Semantic segmentation: the model's own logits, [batch, labels, height / 4, width / 4] for a SegFormer. They go back
  onto the photo in one step, as the processor's `post_process_semantic_segmentation` takes them: resized bilinearly
  straight to the photo's size, then the argmax (`modelship.postprocess.class_mask`, in the `_pipeline` and the
  client). Resized to the input's size first, then to the photo's, they answered other pixels (two resizes are not
  one).
- Object detection (DETR and its kin): the detection interface of torchvision's detectors
  (`families.torchvision_detector`): boxes (x1, y1, x2, y2) in the input's pixels, scores and labels as the processor's
  `post_process_object_detection` computes them (softmax over the classes and "no object", the best class but the
  last; boxes from centre and size to corners, scaled to the image), best first, the `num` scoring above its
  threshold valid and the other rows padded (boxes 0, scores 0, labels -1).

The preprocessing is the processor's own, read by transformers' `AutoImageProcessor` from preprocessor_config.json
and turned into a PreprocessSpec that the shared numpy + Pillow module reproduces (`preprocess.hf_processor`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from modelship.checkpoint.families.hf_folder import HFFolder
from modelship.contract.errors import CheckpointError, PreprocessError
from modelship.contract.preprocessing import PreprocessSpec


class ImageLogits(nn.Module):
    """forward(pixel_values) -> {"logits"}: a transformers image classifier or semantic segmenter."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.model(pixel_values=pixel_values).logits}


class BoxTensors(ImageLogits):
    """forward(pixel_values) -> {"boxes", "scores", "labels", "num"}: a transformers DETR-style detector."""

    score_threshold = 0.5  # (a model hook) post_process_object_detection's default threshold

    def forward(self, pixel_values: torch.Tensor) -> dict[str, torch.Tensor]:
        answer = self.model(pixel_values=pixel_values)
        scores, labels = answer.logits.softmax(-1)[..., :-1].max(-1)
        scores, order = scores.topk(scores.shape[1], dim=1)  # best first (ONNX TopK)
        labels = labels.gather(1, order)
        centre_x, centre_y, width, height = answer.pred_boxes.gather(1, order[..., None].expand(-1, -1, 4)).unbind(-1)
        image_height, image_width = pixel_values.shape[-2:]  # traced as the input's size, not as constants
        corners = [
            (centre_x - 0.5 * width) * image_width,
            (centre_y - 0.5 * height) * image_height,
            (centre_x + 0.5 * width) * image_width,
            (centre_y + 0.5 * height) * image_height,
        ]
        valid = scores > self.score_threshold
        return {
            "boxes": torch.stack(corners, -1) * valid[..., None],
            "scores": scores * valid,
            "labels": torch.where(valid, labels, torch.full_like(labels, -1)),
            "num": valid.sum(dim=1),
        }


WRAPPERS = {"classification": ImageLogits, "segmentation": ImageLogits, "detection": BoxTensors}


def wrap_image_model(model: nn.Module, folder: HFFolder) -> ImageLogits:
    """The model behind the image interface of its task; a CheckpointError when its labels do not fit its head."""
    outputs = getattr(model.config, "num_labels", None)
    if folder.labels is not None and outputs is not None and len(folder.labels) != outputs:
        raise CheckpointError(
            f"{folder.root / 'config.json'}: id2label has {len(folder.labels)} labels for a head of {outputs} outputs",
            hint=f'give id2label one label per output, "0" to "{outputs - 1}"',
        )
    return WRAPPERS[folder.task](model).eval()


def read_processor(folder: HFFolder) -> Any:
    """The folder's image processor, as `AutoImageProcessor.from_pretrained(folder)` gives it (no hub: the local file
    alone)."""
    from transformers import AutoImageProcessor

    assert folder.processor is not None  # callers read a folder that has preprocessor_config.json
    try:
        return AutoImageProcessor.from_pretrained(str(folder.processor.parent), local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{folder.processor}: transformers cannot read this image processor ({exc})",
            hint="save it again with AutoImageProcessor...save_pretrained(folder)",
        ) from None


def image_spec(folder: HFFolder) -> PreprocessSpec:
    """The folder's image processor as a PreprocessSpec; a CheckpointError naming the option modelship cannot
    reproduce."""
    from modelship.preprocess.hf_processor import from_image_processor

    try:
        return from_image_processor(read_processor(folder))
    except PreprocessError as exc:
        raise CheckpointError(f"{folder.processor}: {exc.message}", hint=exc.hint) from None
