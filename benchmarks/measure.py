"""The two sides of every serving comparison: in-process ONNX Runtime and the same inputs through Triton."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from modelship.bench.inprocess_protocol import (
    Image,
    Measure,
    Open,
    Outputs,
    Reply,
    Request,
    Window,
    read_reply,
    request_line,
)
from modelship.bench.workspace import BenchPlan, LoadProtocol
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TokenizerSource
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import sender
from modelship.serve.load.stats import LoadStats
from modelship.serve.protocols import WireProtocol


def reference_outputs(path: Path, inputs: Tensors) -> Tensors:
    """The ONNX file's outputs for `inputs`, computed here (what a request's outputs look like: names, dtypes,
    shapes). Not a measurement: throughput is measured by InProcess."""
    from modelship.parity import make_session

    session = make_session(path)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs), strict=True))


class InProcess:
    """In-process ONNX Runtime throughput, measured in a process of its own (`inprocess_worker`: onnxruntime and
    numpy only, never torch) with the session settings of the server's onnxruntime backend for one instance, so the
    baseline is what a standalone program gets (`threads`: intra-op threads, default the cores, as the backend's
    default for one instance). With `torchscript_output`, a TorchScript module instead, as the pytorch backend runs
    it, in a process that has run nothing else. A context manager; the worker also ends when this process does."""

    def __init__(
        self,
        path: Path,
        threads: int | None = None,
        tokenizer: TokenizerSource | None = None,
        *,
        torchscript_output: str | None = None,
    ) -> None:
        from modelship.contract.artifact_details import FP16_DISABLED_OPTIMIZERS
        from modelship.parity.runners import is_fp16_model

        self._folder = Path(tempfile.mkdtemp(prefix="modelship-inprocess-"))
        self._worker = subprocess.Popen(
            [sys.executable, "-m", "modelship.bench.inprocess_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        threads = threads or cpu_threads()
        if torchscript_output is not None:  # a TorchScript module answering this output (the worker imports torch)
            self._ask(Open(str(path), threads, torchscript_output=torchscript_output))
            return
        disabled = list(FP16_DISABLED_OPTIMIZERS) if is_fp16_model(path) else []
        if self._ask(Open(str(path), threads, disabled, tokenizer)).torch:
            raise RuntimeError("the in-process baseline's worker imported torch")

    def _ask(self, request: Request) -> Reply:
        assert self._worker.stdin is not None and self._worker.stdout is not None
        self._worker.stdin.write(request_line(request))
        self._worker.stdin.flush()
        line = self._worker.stdout.readline()
        if not line:
            raise RuntimeError(f"the in-process worker exited (code {self._worker.wait()})")
        reply = read_reply(line)
        if reply.error is not None:
            raise RuntimeError(f"in-process worker: {reply.error}")
        return reply

    def _measure(self, request: Measure) -> LoadStats:
        stats = self._ask(request).stats
        assert stats is not None, "the worker answers a measurement with its stats"
        return stats

    def _write(self, inputs: Tensors) -> str:
        path = self._folder / "inputs.npz"
        np.savez(path, **inputs)
        return str(path)

    def outputs(self, inputs: Tensors) -> Tensors:
        out = self._folder / "outputs.npz"
        self._ask(Outputs(str(out), inputs=self._write(inputs)))
        with np.load(out) as data:
            return {name: data[name] for name in data.files}

    def measure(self, inputs: Tensors, plan: BenchPlan, *, concurrency: int = 1) -> LoadStats:
        return self._measure(Measure(concurrency, _window(plan), inputs=self._write(inputs)))

    def measure_texts(self, texts: list[str], plan: BenchPlan, *, concurrency: int = 1) -> LoadStats:
        """Tokenize `texts` and run them, per request (a worker opened with a tokenizer)."""
        return self._measure(Measure(concurrency, _window(plan), texts=texts))

    def image_pipeline(self, encoded: bytes, spec: PreprocessSpec, *, mask: bool) -> np.ndarray:
        """From now on a request is an image pipeline's work: decode `encoded`, preprocess it by `spec`, run the
        model, then (`mask`) its class mask at the image's size. Answers one request's output."""
        image = self._folder / "image"
        image.write_bytes(encoded)
        self._ask(Image(str(image), spec, mask))
        out = self._folder / "output.npy"
        self._ask(Outputs(str(out), image=True))
        return np.load(out)

    def measure_images(self, plan: BenchPlan, *, concurrency: int = 1) -> LoadStats:
        """The image pipeline's requests (`image_pipeline`), `concurrency` at a time."""
        return self._measure(Measure(concurrency, _window(plan), image=True))

    def close(self) -> None:
        if self._worker.stdin is not None:
            self._worker.stdin.close()
        self._worker.wait(timeout=30)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _window(plan: BenchPlan) -> Window:
    return Window(plan.window_s, plan.warmup_s, plan.max_requests)


STANDALONE = """
import sys, time
import numpy as np
import onnxruntime as ort
model, inputs, threads = sys.argv[1], dict(np.load(sys.argv[2])), int(sys.argv[3])
window, warmup = float(sys.argv[4]), float(sys.argv[5])
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
session.run(None, inputs)
began = time.perf_counter()
while time.perf_counter() - began < warmup:
    session.run(None, inputs)
count, began = 0, time.perf_counter()
while time.perf_counter() - began < window:
    session.run(None, inputs)
    count += 1
print(count * len(next(iter(inputs.values()))) / (time.perf_counter() - began))
"""


def cpu_threads() -> int:
    """The backend's default intra-op threads for one instance: the cores."""
    return os.cpu_count() or 1


# A fresh process runs slower for about its first second (page faults, allocator growth): the small model read 5%
# below the long-lived worker after a 0.25 s warmup, within 2% of it after 1 s (measured 2026-12-01, 8 pairs each).
STANDALONE_WARMUP_S = 1.0


def standalone_throughput(path: Path, inputs: Tensors, plan: BenchPlan, threads: int | None = None) -> LoadStats:
    """What a standalone program gets from the same file with the same settings: a fresh interpreter running only
    the few lines a user would write (onnxruntime, numpy, a warmup of STANDALONE_WARMUP_S, a timed loop of
    `plan.window_s`). The check on the InProcess baseline."""
    with tempfile.TemporaryDirectory(prefix="modelship-standalone-") as folder:
        np.savez(Path(folder) / "inputs.npz", **inputs)
        command = [sys.executable, "-c", STANDALONE, str(path), str(Path(folder) / "inputs.npz")]
        done = subprocess.run(
            [*command, str(threads or cpu_threads()), str(plan.window_s), str(max(plan.warmup_s, STANDALONE_WARMUP_S))],
            capture_output=True,
            text=True,
            check=True,
        )
    throughput = float(done.stdout.strip().splitlines()[-1])
    batch = len(next(iter(inputs.values())))
    latency = batch / throughput * 1e3
    return LoadStats(batch, 1, throughput, latency, latency, latency, latency, source="standalone")


def served(
    server: Any,
    protocol: LoadProtocol,
    model: str,
    inputs: Tensors,
    outputs: Tensors,
    plan: BenchPlan,
    *,
    concurrency: int = 1,
) -> LoadStats:
    """Throughput and latency of `model` on `server` (a running serve.server.TritonServer) with the loadgen, over
    `protocol`, as the bench plan holds it."""
    grpc = protocol.wire is WireProtocol.GRPC
    url, headers = (server.grpc_url, server.grpc_admin_headers) if grpc else (server.http_url, server.admin_headers)
    return run_load(
        sender(url, protocol.wire, model, inputs, outputs, protocol.variant, headers),
        concurrency=concurrency,
        batch=len(next(iter(inputs.values()))),
        duration_s=plan.window_s,
        max_requests=plan.max_requests,
        warmup=2,
        warmup_s=plan.warmup_s,
    )


def latency_notes(stats: LoadStats) -> str:
    return f"p50/95/99 {stats.p50_ms:.1f}/{stats.p95_ms:.1f}/{stats.p99_ms:.1f} ms"
