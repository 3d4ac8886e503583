"""The in-process baseline's own process: `python -m modelship.bench.inprocess_worker`, driven over stdin/stdout.

The bench process has run torch (exports, the fp16 check's worker, TorchScript verification threads); measured
there, ONNX Runtime competed with torch's OpenMP threads and caches and read up to 1.8x slower than a standalone
process. This process imports only onnxruntime, numpy, the bench's load generator and its protocol, never torch,
and makes its session exactly as the server's onnxruntime backend does (all graph optimizations, intra-op threads =
cores for one instance, one inter-op thread, the disabled optimizers the published config names).

One request per line in, one reply per line out (`inprocess_protocol`):
    Open(path, threads, disabled_optimizers)     -> Reply(torch=False)
    Outputs(OUT.npz, inputs=IN.npz)              -> Reply()
    Measure(concurrency, window, inputs=IN.npz)  -> Reply(stats=...)
    Open(..., tokenizer=...)                     a text model: texts are tokenized per request, then run (as a
    Measure(..., texts=[...])                    server does)
    Open(path, threads, torchscript_output=NAME) a TorchScript module (this process then imports torch, and has run
                                                 nothing else)
    Image(FILE, preprocess, mask)                an image pipeline: per request the encoded image is decoded,
    Outputs | Measure(..., image=True)           preprocessed and run (then its class mask at the image's size)
Errors answer Reply(error=...); end of input ends the process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime as ort

from modelship.bench.inprocess_protocol import Image, Measure, Open, Outputs, Reply, Request, read_request, reply_line
from modelship.contract.tensors import Tensors
from modelship.serve.load.loadgen import run_load

if TYPE_CHECKING:
    from modelship.preprocess.tokenizer import TextTokenizer


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


def _inputs(path: str) -> Tensors:
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


def _image_job(request: Image, run: Callable[[np.ndarray], np.ndarray]) -> Callable[[], np.ndarray]:
    """Decode the request's encoded image, preprocess it by its spec, run it, then (a segmenter) its class mask at
    the image's size: what an image pipeline does per request."""
    from modelship.postprocess import class_mask
    from modelship.preprocess import decode_image, transform

    encoded = Path(request.image).read_bytes()
    spec, mask = request.preprocess, request.mask

    def job() -> np.ndarray:
        photo = decode_image(encoded)
        answer = run(transform(photo, spec)[None])
        return class_mask(answer[0], (photo.height, photo.width))[None] if mask else answer

    return job


def _measure(request: Measure, job: Callable[[], object], batch: int, source: str) -> Reply:
    """`job` run by the load generator with the request's concurrency and window; the reply carries its stats."""
    stats = run_load(
        lambda: job,
        concurrency=request.concurrency,
        batch=batch,
        duration_s=request.window.window_s,
        max_requests=request.window.max_requests,
        warmup_s=request.window.warmup_s,
        source=source,
    )
    return Reply(stats=stats)


@dataclass
class State:
    """What the requests so far have opened: the ONNX session, the function that runs one input array, a text
    model's tokenizer, the image pipeline's job."""

    session: Any = None
    run: Callable[[np.ndarray], np.ndarray] | None = None
    tokenizer: TextTokenizer | None = None
    job: Callable[[], np.ndarray] | None = None


def handle(request: Request, state: State) -> Reply:
    if isinstance(request, Open) and request.torchscript_output is not None:
        state.run = _torchscript(request.path, request.threads, request.torchscript_output)
        return Reply(torch=True)
    if isinstance(request, Open):
        session = state.session = make_session(request.path, request.threads, request.disabled_optimizers)
        name = session.get_inputs()[0].name
        state.run = lambda array: session.run(None, {name: array})[0]
        if request.tokenizer is not None:
            from modelship.preprocess.tokenizer import TextTokenizer

            state.tokenizer = TextTokenizer(request.tokenizer.path, request.tokenizer.spec)
        return Reply(torch="torch" in sys.modules)
    if isinstance(request, Image):
        assert state.run is not None, "Image comes after Open"
        state.job = _image_job(request, state.run)
        return Reply()
    if request.image:
        job = state.job
        assert job is not None, "an image request comes after Image"
        if isinstance(request, Outputs):
            np.save(request.out, job())
            return Reply()
        return _measure(request, job, 1, "in-process image pipeline")
    session = state.session
    if isinstance(request, Measure) and request.texts is not None:
        tokenizer, texts = state.tokenizer, request.texts
        assert tokenizer is not None, "texts come after Open(tokenizer=...)"
        return _measure(
            request, lambda: session.run(None, tokenizer.encode(texts)), len(texts), "tokenizers + onnxruntime"
        )
    assert request.inputs is not None, "a request that holds neither texts nor an image names its inputs"
    inputs = _inputs(request.inputs)
    if isinstance(request, Outputs):
        names = [o.name for o in session.get_outputs()]
        np.savez(request.out, **dict(zip(names, session.run(None, inputs), strict=True)))
        return Reply()
    return _measure(request, lambda: session.run(None, inputs), len(next(iter(inputs.values()))), "onnxruntime")


def main() -> None:
    state = State()
    for line in sys.stdin:
        try:
            reply = handle(read_request(line), state)
        except Exception as exc:  # every failure is an answer: the bench reports it
            reply = Reply(error=f"{type(exc).__name__}: {exc}")
        sys.stdout.write(reply_line(reply))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
