"""A candidate as a Triton config, and the published config as a candidate (pure: Triton's JSON config in and
out, as `TritonClient.model_config` gives it and `load` takes it back)."""

from __future__ import annotations

import copy
import json
import os

from modelship.contract.json_object import JsonObject
from modelship.serve.model_info import instance_count
from modelship.serve.triton_config import PARAM_EXPORT
from modelship.serve.tune.space import Candidate

THREADS = "intra_op_thread_count"  # what the ONNX Runtime and LibTorch backends read (0 or unset: their default)


def published(artifact: str, config: JsonObject, cores: int | None = None) -> Candidate:
    """The candidate a published config is: its instances, its threads (as its backend defaults them: the cores
    over the instances), its batch and its queue delay."""
    instances = instance_count(config)
    threads = int(config.get("parameters", {}).get(THREADS, {}).get("string_value", "0") or 0)
    cores = cores or os.cpu_count() or 1
    return Candidate(
        artifact,
        instances,
        threads or max(1, cores // instances),
        int(config.get("max_batch_size", 0)),
        int(config.get("dynamic_batching", {}).get("max_queue_delay_microseconds", 0)),
    )


def export_of(config: JsonObject) -> str | None:
    """The export a served config's model was published from (None: not published by modelship, or a pipeline)."""
    record = config.get("parameters", {}).get(PARAM_EXPORT, {}).get("string_value")
    return json.loads(record).get("export") if record else None


def override(config: JsonObject, candidate: Candidate) -> JsonObject:
    """`config` serving as `candidate`: one instance group of its count (the published kind kept), its threads,
    its largest batch and its queue delay. Everything else (tensors, warmup, parameters) as published."""
    changed = copy.deepcopy(config)
    groups = changed.get("instance_group") or [{}]
    group = {k: v for k, v in groups[0].items() if k in ("kind", "gpus", "name")}
    changed["instance_group"] = [{**group, "count": candidate.instances}]
    changed.setdefault("parameters", {})[THREADS] = {"string_value": str(candidate.threads)}
    if int(config.get("max_batch_size", 0)) > 0:
        changed["max_batch_size"] = candidate.max_batch_size
        batching = changed.setdefault("dynamic_batching", {})
        batching["max_queue_delay_microseconds"] = candidate.queue_delay_us
        batching.pop("preferred_batch_size", None)
    return changed


def is_pipeline(config: JsonObject) -> bool:
    return "ensemble_scheduling" in config


def steps(config: JsonObject) -> list[str]:
    """The models an ensemble steps into, in its config's order (none for any other model)."""
    return [step["model_name"] for step in config.get("ensemble_scheduling", {}).get("step", [])]


def repoint(pipeline: JsonObject, old: JsonObject, new: JsonObject) -> JsonObject:
    """`pipeline` (an ensemble's config) with its step into `old` (an artifact's config) stepping into `new`
    instead. The artifacts of one export take and give the same tensors in the same order, under their format's
    names (TorchScript's INPUT__0), so the step's tensors are matched by position; each pipeline output the step
    gives is typed as `new` gives it (an fp16 artifact's float16 logits)."""
    changed = copy.deepcopy(pipeline)
    step = next(s for s in changed["ensemble_scheduling"]["step"] if s["model_name"] == old["name"])
    inputs = _by_position(old.get("input", []), new.get("input", []))
    outputs = _by_position(old.get("output", []), new.get("output", []))
    step["model_name"] = new["name"]
    step["input_map"] = {inputs[served]: own for served, own in step.get("input_map", {}).items()}
    step["output_map"] = {outputs[served]: own for served, own in step.get("output_map", {}).items()}
    given = step["output_map"]
    types = {given[t["name"]]: t["data_type"] for t in new.get("output", []) if t["name"] in given}
    for tensor in changed.get("output", []):
        tensor["data_type"] = types.get(tensor["name"], tensor["data_type"])
    return changed


def _by_position(old: list[JsonObject], new: list[JsonObject]) -> dict[str, str]:
    return {a["name"]: b["name"] for a, b in zip(old, new, strict=True)}
