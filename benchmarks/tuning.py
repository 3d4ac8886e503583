"""Benchmark-only edits of a published model's `config.pbtxt` (dynamic batching, queue delay, instances, threads).

The publisher writes the production config; benchmarks compare variants of it (dynamic batching on vs off, one vs
two instances...), so they copy a published model under a new name and edit the copy through tritonclient's
`model_config_pb2` (serve.triton_config's parser and printer), never by string surgery.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from modelship.serve.triton_config import parse_config, to_text

CONFIG = "config.pbtxt"


def read_config(model_dir: Path) -> model_config_pb2.ModelConfig:
    path = Path(model_dir) / CONFIG
    return parse_config(path.read_text(), str(path))


def write_config(model_dir: Path, config: model_config_pb2.ModelConfig) -> Path:
    path = Path(model_dir) / CONFIG
    path.write_text(to_text(config))
    return path


def clone_model(repo: Path, source: str, name: str) -> Path:
    """Copy `repo/source` to `repo/name` (replacing an older copy) and rename it in its config."""
    target = Path(repo) / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(Path(repo) / source, target, symlinks=True)
    config = read_config(target)
    config.name = name
    write_config(target, config)
    return target


def tune_model(
    model_dir: Path,
    *,
    dynamic_batching: bool | None = None,
    queue_delay_us: int | None = None,
    instances: int | None = None,
    intra_op_threads: int | None = None,
) -> model_config_pb2.ModelConfig:
    """Edit `model_dir/config.pbtxt` in place; arguments left None keep what the publisher wrote."""
    config = read_config(model_dir)
    if dynamic_batching is False:
        config.ClearField("dynamic_batching")
    elif dynamic_batching or queue_delay_us is not None:
        config.dynamic_batching.SetInParent()
    if queue_delay_us is not None:
        config.dynamic_batching.max_queue_delay_microseconds = queue_delay_us
    if instances is not None:
        if not config.instance_group:
            config.instance_group.add(kind=model_config_pb2.ModelInstanceGroup.KIND_CPU)
        del config.instance_group[1:]
        config.instance_group[0].count = instances
    if intra_op_threads is not None:
        config.parameters["intra_op_thread_count"].string_value = str(intra_op_threads)
    write_config(model_dir, config)
    return config
