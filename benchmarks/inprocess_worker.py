"""The in-process baseline's own process: `python -m modelship.bench.inprocess_worker`, driven over stdin/stdout.

The bench process has run torch (exports, the fp16 check's worker, TorchScript verification threads); measured
there, ONNX Runtime competed with torch's OpenMP threads and caches and read up to 1.8x slower than a standalone
process. This process imports only onnxruntime, numpy and the bench's load generator, never torch, and makes its
session exactly as the server's onnxruntime backend does (all graph optimizations, intra-op threads = cores for one
instance, one inter-op thread, the disabled optimizers the published config names).

One JSON request per line in, one JSON answer per line out:
    {"op": "open", "path": ..., "threads": N, "disabled_optimizers": [...]}  -> {"ok": true, "torch": false}
    {"op": "outputs", "inputs": IN.npz, "out": OUT.npz}                      -> {"ok": true}
    {"op": "measure", "inputs": IN.npz, "concurrency": C, "window_s": W, "warmup_s": S, "max_requests": R}
                                                                              -> {"ok": true, "stats": {...}}
    {"op": "open", ..., "tokenizer": FILE, "tokenizer_spec": {...}}          a text model: texts are tokenized
    {"op": "measure", "texts": [...], ...}                                   per request, then run (as a server does)
Errors answer {"ok": false, "error": ...}; end of input ends the process.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import onnxruntime as ort

from modelship.bench.loadgen import run_load


def make_session(path: str, threads: int, disabled_optimizers: list[str]) -> Any:
    """The session the server's onnxruntime backend makes for one instance (serve/backends/onnxruntime)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(
        path, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled_optimizers
    )


def _inputs(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def handle(request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "open":
        state["session"] = make_session(request["path"], request["threads"], request["disabled_optimizers"])
        if request.get("tokenizer"):
            from modelship.contract.text import TokenizerSpec
            from modelship.preprocess.text import TextTokenizer

            state["tokenizer"] = TextTokenizer(request["tokenizer"], TokenizerSpec.from_dict(request["tokenizer_spec"]))
        return {"ok": True, "torch": "torch" in sys.modules}
    session = state["session"]
    if op == "measure" and "texts" in request:
        tokenizer, texts = state["tokenizer"], request["texts"]
        stats = run_load(
            lambda: lambda: session.run(None, tokenizer.encode(texts)),
            concurrency=request["concurrency"],
            batch=len(texts),
            duration_s=request["window_s"],
            max_requests=request["max_requests"],
            warmup_s=request["warmup_s"],
            source="tokenizers + onnxruntime",
        )
        return {"ok": True, "stats": stats.to_dict()}
    inputs = _inputs(request["inputs"])
    if op == "outputs":
        names = [o.name for o in session.get_outputs()]
        np.savez(request["out"], **dict(zip(names, session.run(None, inputs), strict=True)))
        return {"ok": True}
    if op == "measure":
        stats = run_load(
            lambda: lambda: session.run(None, inputs),
            concurrency=request["concurrency"],
            batch=len(next(iter(inputs.values()))),
            duration_s=request["window_s"],
            max_requests=request["max_requests"],
            warmup_s=request["warmup_s"],
            source="onnxruntime",
        )
        return {"ok": True, "stats": stats.to_dict()}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    state: dict[str, Any] = {}
    for line in sys.stdin:
        try:
            answer = handle(json.loads(line), state)
        except Exception as exc:  # every failure is an answer: the bench reports it
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
