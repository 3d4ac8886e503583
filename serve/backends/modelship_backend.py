"""What the Python-based stand-in backends share: config parameters, thread defaults, load-time validation with the
native backends' rules and wording, and batched execution.

Copied beside each backend's model.py (the stub puts that folder on sys.path); numpy only, plus Triton's utils when
running inside the server. The validation rules and messages follow Triton 2.51's native backends
(onnxruntime_backend ModelInstanceState::ValidateInputs/ValidateOutputs, backend_common CheckAllowedModelInput/
Output, pytorch_backend GetNamingConvention), so a config the native backend refuses fails here at load too, with
the same message, and never reaches warmup. Triton's dynamic batcher hands `execute` several requests at once;
requests whose inputs agree on everything but the batch size are concatenated, run once, and split back, which is
what a native backend does.
"""

import os
import re

import numpy as np

try:  # inside the server; unit tests import the pure functions without it
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - only outside Triton
    pb_utils = None

_NAMED_INDEX = re.compile(r"^.+?__(\d+)$")


class ConfigError(Exception):
    """A config the native backend would refuse at load; the message is the native backend's."""


def parameter(config, key, default=""):
    """A string parameter from the model config's `parameters` map."""
    return config.get("parameters", {}).get(key, {}).get("string_value") or default


def threads(config):
    """`intra_op_thread_count` if set, else the CPU cores shared evenly by the model's instances."""
    instances = sum(int(group.get("count", 1)) for group in config.get("instance_group", [])) or 1
    return int(parameter(config, "intra_op_thread_count", "0")) or max(1, (os.cpu_count() or 1) // instances)


def shape_string(shape):
    """Triton's ShapeToString: `[-1,3,224,224]`."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def check_tensors(config, direction, model_tensors, exact):
    """Validate the config's inputs or outputs (`direction`: "input" or "output") against the model's as the native
    ONNX Runtime backend does.

    `model_tensors`: {name: (TYPE_xxx, shape with -1 for dynamic dims)}. Inputs compare dims loosely (a dynamic
    model dim accepts any config value), outputs exactly (`exact`)."""
    name = config.get("name", "")
    entries = config.get(direction, [])
    if direction == "input":
        required = [e for e in entries if not e.get("optional")]
        if len(required) != len(model_tensors):
            raise ConfigError(
                f"unable to load model '{name}', configuration expects {len(required)} inputs, "
                f"model provides {len(model_tensors)}"
            )
    batching = int(config.get("max_batch_size", 0)) > 0
    for entry in entries:
        io = entry["name"]
        if io not in model_tensors:
            allowed = ", ".join(model_tensors)
            raise ConfigError(f"unexpected inference {direction} '{io}', allowed {direction}s are: {allowed}")
        model_type, model_shape = model_tensors[io]
        config_type = entry.get("data_type", "TYPE_INVALID")
        if config_type != model_type:
            raise ConfigError(
                f"unable to load model '{name}', configuration expects datatype {config_type} for {direction} '{io}', "
                f"model provides {model_type}"
            )
        _check_dims(name, io, [int(d) for d in entry.get("dims", [])], list(model_shape), batching, exact)


def _check_dims(model, io, dims, shape, batching, exact):
    if batching:
        if not shape or shape[0] != -1:
            raise ConfigError(
                f"model '{model}', tensor '{io}': for the model to support batching the shape should have at least "
                f"1 dimension and the first dimension must be -1; but shape expected by the model is "
                f"{shape_string(shape)}"
            )
        full = [-1, *dims]
        specified = (
            f"{len(full)} dimensions (an initial batch dimension because max_batch_size > 0 followed by the "
            f"explicit tensor shape, making complete shape {shape_string(full)})"
        )
    else:
        full = dims
        specified = f"{len(full)} dimensions (shape {shape_string(full)})"
    fits = len(full) == len(shape) and all(
        m == c if exact else (m == -1 or m == c) for m, c in zip(shape, full, strict=True)
    )
    if not fits:
        raise ConfigError(
            f"model '{model}', tensor '{io}': the model expects {len(shape)} dimensions (shape "
            f"{shape_string(shape)}) but the model configuration specifies {specified}"
        )


def torch_argument_order(config, forward_arguments):
    """The config's input names in forward() order, by the LibTorch backend's naming conventions: every name a
    forward argument (FORWARD_ARGUMENT), else every name `<name>__<index>` (NAMED_INDEX), else the config's own
    order (STRICT_CONFIG_ORDERING). ConfigError when the counts differ, as the native backend refuses."""
    names = [entry["name"] for entry in config.get("input", [])]
    if not names:
        raise ConfigError("model configuration must contain at least one input, none were specified.")
    if len(names) != len(forward_arguments):
        raise ConfigError(
            f"unable to load model '{config.get('name', '')}', configuration expects {len(names)} inputs, "
            f"model provides {len(forward_arguments)}"
        )
    if all(n in forward_arguments for n in names):
        return sorted(names, key=forward_arguments.index)
    return _by_index(names)


def torch_output_order(config):
    """The config's output names in the order of the returned tensors: `<name>__<index>`, else config order."""
    names = [entry["name"] for entry in config.get("output", [])]
    if not names:
        raise ConfigError("model configuration must contain at least one output, none were specified.")
    return _by_index(names)


def _by_index(names):
    indices = [m for m in map(_NAMED_INDEX.match, names) if m is not None]
    if len(indices) == len(names):
        return [n for _, n in sorted(zip((int(m.group(1)) for m in indices), names, strict=True))]
    return list(names)


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
    groups: dict[tuple[tuple[str, tuple[int, ...], str], ...], list[int]] = {}
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
