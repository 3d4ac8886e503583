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
