"""Server-side tokenization: `<name>_tokenize` (a Python-backend model running modelship's tokenizer module on the
export's tokenizer.json) and `<name>_pipeline` (an ensemble: tokenize -> the artifact's model), so any client sends
UTF-8 texts and gets logits or embeddings, with no tokenizer of its own.

    <repo>/<name>_tokenize/config.pbtxt          backend "python"; TEXT (TYPE_STRING) -> the model's INT64 inputs
    <repo>/<name>_tokenize/<N>/model.py          serve/python_models/tokenize.py
    <repo>/<name>_tokenize/<N>/tokenizer.json, tokenizer_spec.json, modelship/...   what it runs
    <repo>/<name>_pipeline/config.pbtxt          platform "ensemble"; TEXT -> the artifact's outputs, own names
    <repo>/<name>_pipeline/labels.txt            a text classifier's labels (the classification extension)

Stock Triton images have numpy but not `tokenizers` in the Python backend: `serve.stock_image` says what an
operator adds.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.errors import PublishError
from modelship.contract.manifest import Artifact
from modelship.contract.tokenizer import TokenizerSpec
from modelship.serve.ensemble import PIPELINE_SUFFIX, ensemble_config, on_cpu
from modelship.serve.triton_config import ServingOptions, triton_names
from modelship.serve.vendoring import stage_python_model

TOKENIZE_SUFFIX = "_tokenize"
TEXT = "TEXT"  # the pipeline's input: UTF-8 texts, one per batch row
SPEC_FILE = "tokenizer_spec.json"


@dataclass(frozen=True)
class TextPipelinePlan:
    """What the text pipeline of one artifact needs: its names, the artifact and the tokenizer it runs."""

    tokenize_name: str
    pipeline_name: str
    model_name: str  # the artifact's Triton model
    artifact: Artifact
    spec: TokenizerSpec


def plan_text_pipeline(base: str, model_name: str, artifact: Artifact, spec: TokenizerSpec | None) -> TextPipelinePlan:
    """The text pipeline for `artifact` served as `model_name`, or a PublishError saying why it cannot have one."""
    if spec is None:
        raise PublishError(
            f"export {base!r} has no tokenizer: a text pipeline needs one",
            hint="export from a folder with its tokenizer.json, or pass --pipeline-artifact none",
        )
    names = [t.name for t in artifact.io.inputs]
    if names != list(spec.inputs):
        raise PublishError(f"artifact {artifact.name!r} takes {names}, the tokenizer gives {list(spec.inputs)}")
    if not artifact.io.batched:
        raise PublishError(f"artifact {artifact.name!r} has no batch axis: no pipeline for it")
    return TextPipelinePlan(base + TOKENIZE_SUFFIX, base + PIPELINE_SUFFIX, model_name, artifact, spec)


def tokenize_config(plan: TextPipelinePlan, options: ServingOptions) -> mc.ModelConfig:
    """The Python-backend model: TEXT in, the model's INT64 text inputs out ([-1]: padded per request)."""
    config = mc.ModelConfig(name=plan.tokenize_name, backend="python", max_batch_size=options.max_batch_size)
    config.input.add(name=TEXT, data_type=mc.TYPE_STRING, dims=[1])
    for name in plan.spec.inputs:
        config.output.add(name=name, data_type=mc.TYPE_INT64, dims=[-1])
    on_cpu(config, options)
    config.version_policy.latest.num_versions = 1
    return config


def text_pipeline_config(
    plan: TextPipelinePlan, options: ServingOptions, labels: list[str] | None, task: str
) -> mc.ModelConfig:
    """The ensemble TEXT -> tokenize -> model, with the model's outputs under the export's names."""
    names = triton_names(plan.artifact)
    config = ensemble_config(plan.pipeline_name, TEXT, plan.artifact, options, labels, task)
    tokenize = config.ensemble_scheduling.step.add(model_name=plan.tokenize_name, model_version=-1)
    tokenize.input_map[TEXT] = TEXT
    model = config.ensemble_scheduling.step.add(model_name=plan.model_name, model_version=-1)
    for served, own in names.inputs.items():
        tokenize.output_map[own] = own
        model.input_map[served] = own
    for served, own in names.outputs.items():
        model.output_map[served] = own
    return config


def stage_tokenize_files(plan: TextPipelinePlan, export_dir: Path, version_dir: Path) -> None:
    """The tokenize model's version folder: model.py, the tokenizer and its settings, the modules it imports."""
    stage_python_model("tokenize", version_dir)
    shutil.copy2(export_dir / plan.spec.file, version_dir / plan.spec.file)
    (version_dir / SPEC_FILE).write_text(json.dumps(plan.spec.to_dict(), indent=2) + "\n")
