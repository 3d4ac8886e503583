"""Benchmark-only edits of a published model's `config.pbtxt`.

The publisher writes the production config; the serving suite sets the small model's ONNX Runtime threads on
every side of its comparisons, editing the config through tritonclient's `model_config_pb2` (serve.triton_config's
parser and printer), never by string surgery.
"""

from __future__ import annotations

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


def set_intra_op_threads(model_dir: Path, threads: int) -> model_config_pb2.ModelConfig:
    """Edit `model_dir/config.pbtxt` in place: ONNX Runtime's intra-op threads (what the in-process side uses)."""
    config = read_config(model_dir)
    config.parameters["intra_op_thread_count"].string_value = str(threads)
    write_config(model_dir, config)
    return config
