"""What every served pipeline shares, image (serve.image_pipeline) or text (serve.text_pipeline): the `_pipeline`
ensemble's own config, before its steps (the request's encoded input in; the artifact's outputs, labels and task
out), and the CPU instances with dynamic batching its Python-backend steps run on."""

from __future__ import annotations

import json

from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.manifest import Artifact
from modelship.serve.triton_config import (
    CLASSIFIABLE,
    LABELS_FILE,
    PARAM_LABELS,
    PARAM_TASK,
    ServingOptions,
    add_tensor,
)
from modelship.tasks import get_task

PIPELINE_SUFFIX = "_pipeline"


def on_cpu(config: mc.ModelConfig, options: ServingOptions, *, batched: bool = True) -> None:
    """Dynamically batched (when `batched`), on CPU instances: decoding and masks run on the CPU even when the
    model has a GPU."""
    if batched:
        config.dynamic_batching.max_queue_delay_microseconds = options.max_queue_delay_us
    config.instance_group.add(count=options.instances, kind=mc.ModelInstanceGroup.KIND_CPU)


def ensemble_config(
    name: str,
    request_input: str,
    artifact: Artifact,
    options: ServingOptions,
    labels: list[str] | None,
    task: str,
    *,
    batched: bool = True,
) -> mc.ModelConfig:
    """A pipeline's ensemble without its steps: `request_input` (encoded bytes, one per batch row) in, the
    artifact's outputs under the export's names out, its labels (the classification extension on the first output
    when it is class scores: the output `pipeline_output` names) and its task. Not `batched`: one request, one
    row, held in the dims."""
    config = mc.ModelConfig(name=name, platform="ensemble", max_batch_size=options.max_batch_size if batched else 0)
    config.input.add(name=request_input, data_type=mc.TYPE_STRING, dims=[1] if batched else [1, 1])
    for spec in artifact.io.outputs:
        add_tensor(config.output, spec.name, spec, batched=batched, reshape=False)
    if labels and get_task(task).label_output and artifact.io.outputs[0].dtype in CLASSIFIABLE:
        config.output[0].label_filename = LABELS_FILE
    if labels:
        config.parameters[PARAM_LABELS].string_value = json.dumps(list(labels))  # what modelship clients read
    config.parameters[PARAM_TASK].string_value = task
    config.version_policy.latest.num_versions = 1
    return config
