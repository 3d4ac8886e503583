"""`detection`: per image, a padded set of boxes, scores and labels plus the number of valid rows (the interface of
`families.torchvision_detector`). `boxes` is judged as detections (matched one to one with the reference's, with
their scores and labels: `modelship.parity.box_compare`); `scores`, `labels`, `num` and Mask / Keypoint R-CNN's
`masks` and `keypoints` are part of that verdict.
Height and width are dynamic by default: a detector takes images of any size and resizes them itself."""

from __future__ import annotations

from modelship.contract.box_result import DETECTION_OUTPUTS
from modelship.contract.iospec import IOSpec, TensorSpec
from modelship.contract.opsets import OnnxExporter
from modelship.contract.parity_report import PART
from modelship.tasks.registry import Preprocessing, Task, register_task


def output_kind(spec: TensorSpec) -> str:
    """`boxes` carries the verdict of every output: matched boxes, their scores, labels, masks and keypoints."""
    return "detections" if spec.name == "boxes" else PART


def claims(io: IOSpec) -> bool:
    """A model answering every one of boxes, scores, labels and num."""
    return set(DETECTION_OUTPUTS) <= {spec.name for spec in io.outputs}


DETECTION = register_task(
    Task(
        name="detection",
        description="boxes, scores and labels per image, boxes matched one to one and compared on pixels and scores",
        output_kind=output_kind,
        claims=claims,
        preprocessing=Preprocessing.IMAGE,
        labels=True,
        label_output=False,
        dynamic=("height", "width"),
        onnx_exporter=OnnxExporter.LEGACY,
        onnx_why="torch.export cannot export torchvision's detectors (data-dependent box counts; pytorch/vision#9462)",
        onnx_single_row=True,
        pipeline_formats=("torchscript", "onnx"),  # ONNX graphs take one image: one per request
        pipeline_same_size=True,
    )
)
