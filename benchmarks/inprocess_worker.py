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
    {"op": "open", "path": ..., "threads": N, "runtime": "torchscript", "output": NAME}
                                                                              a TorchScript module (this process then
                                                                              imports torch, and has run nothing else)
    {"op": "image", "image": FILE, "preprocess": {...}, "mask": BOOL}        an image pipeline: per request the encoded
    {"op": "outputs" | "measure", "image": true, ...}                        image is decoded, preprocessed and run
                                                                              (then its class mask at the image's size)
Errors answer {"ok": false, "error": ...}; end of input ends the process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
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


def _torchscript(path: str, threads: int, output: str) -> Callable[[np.ndarray], np.ndarray]:
    """A TorchScript module as the server's pytorch backend runs it (`threads` intra-op threads, inference mode),
    answering its output `output` for one input array. torchvision is imported for its operators (a scripted
    detector calls torchvision::nms), as the backend imports it."""
    import torch
    import torchvision  # noqa: F401

    torch.set_num_threads(threads)
    module = torch.jit.load(path).eval()

    def run(array: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(array))[output].numpy()

    return run


def _image_job(request: dict[str, Any], run: Callable[[np.ndarray], np.ndarray]) -> Callable[[], np.ndarray]:
    """Decode the request's encoded image, preprocess it by its spec, run it, then (a segmenter) its class mask at
    the image's size: what an image pipeline does per request."""
    from modelship.contract.preprocessing import PreprocessSpec
    from modelship.preprocess import decode_image, transform
    from modelship.preprocess.postprocess import class_mask

    encoded = Path(request["image"]).read_bytes()
    spec, mask = PreprocessSpec.from_dict(request["preprocess"]), bool(request["mask"])

    def job() -> np.ndarray:
        photo = decode_image(encoded)
        answer = run(transform(photo, spec)[None])
        return class_mask(answer[0], (photo.height, photo.width))[None] if mask else answer

    return job


def _measure(request: dict[str, Any], job: Callable[[], object], batch: int, source: str) -> dict[str, Any]:
    """`job` run by the load generator with the request's concurrency and window; the answer carries its stats."""
    stats = run_load(
        lambda: job,
        concurrency=request["concurrency"],
        batch=batch,
        duration_s=request["window_s"],
        max_requests=request["max_requests"],
        warmup_s=request["warmup_s"],
        source=source,
    )
    return {"ok": True, "stats": stats.to_dict()}


def handle(request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    op = request["op"]
    if op == "open" and request.get("runtime") == "torchscript":
        state["run"] = _torchscript(request["path"], request["threads"], request["output"])
        return {"ok": True, "torch": True}
    if op == "open":
        session = state["session"] = make_session(request["path"], request["threads"], request["disabled_optimizers"])
        name = session.get_inputs()[0].name
        state["run"] = lambda array: session.run(None, {name: array})[0]
        if request.get("tokenizer"):
            from modelship.contract.tokenizer import TokenizerSpec
            from modelship.preprocess.tokenizer import TextTokenizer

            state["tokenizer"] = TextTokenizer(request["tokenizer"], TokenizerSpec.from_dict(request["tokenizer_spec"]))
        return {"ok": True, "torch": "torch" in sys.modules}
    if op == "image":
        state["job"] = _image_job(request, state["run"])
        return {"ok": True}
    if request.get("image"):
        job = state["job"]
        if op == "outputs":
            np.save(request["out"], job())
            return {"ok": True}
        return _measure(request, job, 1, "in-process image pipeline")
    session = state["session"]
    if op == "measure" and "texts" in request:
        tokenizer, texts = state["tokenizer"], request["texts"]
        return _measure(
            request, lambda: session.run(None, tokenizer.encode(texts)), len(texts), "tokenizers + onnxruntime"
        )
    inputs = _inputs(request["inputs"])
    if op == "outputs":
        names = [o.name for o in session.get_outputs()]
        np.savez(request["out"], **dict(zip(names, session.run(None, inputs), strict=True)))
        return {"ok": True}
    if op == "measure":
        return _measure(request, lambda: session.run(None, inputs), len(next(iter(inputs.values()))), "onnxruntime")
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
