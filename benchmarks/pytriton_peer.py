"""The PyTriton peer: NVIDIA's own way to serve a Python callable through Triton, around the same ONNX Runtime session.

`python -m modelship.bench.pytriton_peer MODEL.onnx NAME HTTP_PORT GRPC_PORT METRICS_PORT THREADS` binds one model,
NAME, on 127.0.0.1: PyTriton starts its bundled tritonserver with its proxy backend, and each batch Triton forms
is handed (over PyTriton's inter-process channel) to this process, which runs it with the session made as the
in-process baseline's (`inprocess_worker.make_session`). Dynamic batching as modelship publishes (max batch 16,
queue delay 100 µs). Started and stopped by the bench (`peer.PyTritonPeer`); clients use tritonclient as with
modelship.
"""

from __future__ import annotations

import signal
import sys

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig

from modelship.bench.inprocess_worker import make_session
from modelship.contract.tensors import Tensors

MAX_BATCH_SIZE = 16
QUEUE_DELAY_US = 100
NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64}


def main(model: str, name: str, http_port: int, grpc_port: int, metrics_port: int, threads: int) -> None:
    # SIGTERM (PeerProcess.close) as SIGINT: PyTriton's serve() then stops its tritonserver before this exits
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    session = make_session(model, threads, [])
    names = [o.name for o in session.get_outputs()]

    @batch
    def infer(**inputs: np.ndarray) -> Tensors:
        return dict(zip(names, session.run(None, inputs), strict=True))

    def tensors(args: list) -> list[Tensor]:
        return [Tensor(name=t.name, dtype=NUMPY_TYPES[t.type], shape=(-1,) * (len(t.shape) - 1)) for t in args]

    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=http_port,
        grpc_address="127.0.0.1",
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        log_verbose=0,
    )
    with Triton(config=config) as triton:  # its own temporary workspace, removed when it stops
        triton.bind(
            model_name=name,
            infer_func=infer,
            inputs=tensors(session.get_inputs()),
            outputs=tensors(session.get_outputs()),
            config=ModelConfig(
                max_batch_size=MAX_BATCH_SIZE,
                batcher=DynamicBatcher(max_queue_delay_microseconds=QUEUE_DELAY_US),
            ),
            strict=True,
        )
        triton.serve()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:7]))
