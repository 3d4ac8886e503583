"""What the Python-based backends share: config parameters, thread defaults, and batched execution.

Copied beside each backend's model.py (the stub puts that folder on sys.path); numpy and Triton's utils only.
Triton's dynamic batcher hands `execute` several requests at once; requests whose inputs agree on everything but
the batch size are concatenated, run once, and split back, which is what a native backend does.
"""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


def parameter(config, key, default=""):
    """A string parameter from the model config's `parameters` map."""
    return config.get("parameters", {}).get(key, {}).get("string_value") or default


def threads(config):
    """`intra_op_thread_count` if set, else the CPU cores shared evenly by the model's instances."""
    instances = sum(int(group.get("count", 1)) for group in config.get("instance_group", [])) or 1
    return int(parameter(config, "intra_op_thread_count", "0")) or max(1, (os.cpu_count() or 1) // instances)


def execute(requests, input_names, run, batched, backend):
    """Triton responses for `requests`; `run(feed) -> {output name: array}` runs one (merged) batch."""
    feeds = [
        {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in input_names}
        for request in requests
    ]
    return [_respond(result, backend) for result in run_requests(feeds, run, batched)]


def _respond(result, backend):
    if isinstance(result, Exception):
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(f"{backend}: {result}"))
    return pb_utils.InferenceResponse([pb_utils.Tensor(k, np.ascontiguousarray(v)) for k, v in result.items()])


def run_requests(feeds, run, batched):
    """`feeds`: one {input name: array} per request. `run(feed) -> {output name: array}`.

    Returns one entry per request: its outputs, or the exception that its batch raised.
    """
    results = [None] * len(feeds)
    for indices in _groups(feeds, batched):
        try:
            outputs = _run_group([feeds[i] for i in indices], run)
        except Exception as exc:  # one bad batch must not fail the other requests
            outputs = [exc] * len(indices)
        for i, out in zip(indices, outputs, strict=True):
            results[i] = out
    return results


def _groups(feeds, batched):
    if not batched:
        return [[i] for i in range(len(feeds))]
    groups = {}
    for i, feed in enumerate(feeds):
        key = tuple((name, array.shape[1:], array.dtype.str) for name, array in sorted(feed.items()))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _run_group(feeds, run):
    if len(feeds) == 1:
        return [run(feeds[0])]
    merged = {name: np.concatenate([feed[name] for feed in feeds]) for name in feeds[0]}
    outputs = run(merged)
    bounds = np.cumsum([len(next(iter(feed.values()))) for feed in feeds])[:-1]
    split = {name: np.split(value, bounds) for name, value in outputs.items()}
    return [{name: parts[k] for name, parts in split.items()} for k in range(len(feeds))]
