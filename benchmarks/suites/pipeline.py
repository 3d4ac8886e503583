"""Server-side preprocessing: an encoded JPEG in, logits out, through `<model>_pipeline` (preprocess on the server,
then the ONNX model), against the same work in one process (decode + preprocess + ONNX Runtime, the same code and
threads), at several concurrencies; the bytes a request carries (JPEG vs the float tensor); the pipeline against
client-side preprocessing plus a tensor request; and where a request's time goes, from Triton's statistics."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from modelship.bench.measure import latency_notes, reference_outputs, served
from modelship.bench.report import Row
from modelship.bench.workspace import GRPC, Workspace, sample_inputs
from modelship.parity import make_session
from modelship.preprocess import decode_image, transform
from modelship.serve.ensemble import PIPELINE_SUFFIX
from modelship.serve.image_pipeline import IMAGE, PREPROCESS_SUFFIX
from modelship.serve.load.loadgen import run_load
from modelship.serve.load.stats import LoadStats, ratio
from modelship.serve.server import TritonServer

SUITE = "pipeline"
CONCURRENCIES = (1, 4, 8)
PROTOCOL = GRPC


def photo_jpeg() -> bytes:
    """A real photo as a client would upload it (scikit-image's chelsea, JPEG quality 90), else a gradient."""
    from PIL import Image

    try:
        import skimage

        image = Image.open(Path(skimage.__file__).parent / "data" / "chelsea.png").convert("RGB")
    except ImportError:
        ramp = np.linspace(0, 255, 300, dtype=np.float32)
        image = Image.fromarray(
            np.stack(np.broadcast_arrays(ramp[:, None], ramp[None, :], ramp[:, None]), -1).astype(np.uint8)
        )
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def run(ws: Workspace) -> list[Row]:
    plan = ws.plan
    key = plan.main_model
    export = ws.export(key)
    spec = export.manifest.preprocess
    if spec is None:
        return [Row(SUITE, f"{key} pipeline", None, "", None, None, "", "the export has no preprocessing spec")]
    repo = ws.repo(SUITE)
    model = ws.publish(repo, key)  # with <key>_preprocess and <key>_pipeline
    pipeline, preprocess = key + PIPELINE_SUFFIX, key + PREPROCESS_SUFFIX
    jpeg = photo_jpeg()
    session = make_session(export.artifact_path("onnx"))
    input_name = session.get_inputs()[0].name
    pixels = transform(decode_image(jpeg), spec)[None]
    outputs = reference_outputs(export.artifact_path("onnx"), {input_name: pixels})

    def in_process() -> None:  # the whole job in one process: decode, preprocess, infer
        session.run(None, {input_name: transform(decode_image(jpeg), spec)[None]})

    ws.log(f"pipeline: in-process decode + preprocess + ORT, {key}")
    base = run_load(lambda: in_process, duration_s=plan.window_s, max_requests=plan.max_requests, source="in-process")
    encoded = {IMAGE: np.array([[jpeg]], dtype=object)}
    rows = []
    with TritonServer(repo) as server:
        by_concurrency: dict[int, LoadStats] = {}
        for concurrency in CONCURRENCIES:
            ws.log(f"pipeline: {pipeline} c{concurrency}")
            before = statistics(server, (pipeline, preprocess, model)) if concurrency == 1 else {}
            stats = served(server, PROTOCOL, pipeline, encoded, outputs, plan, concurrency=concurrency)
            by_concurrency[concurrency] = stats
            rows.append(
                Row(SUITE, f"{key} pipeline jpeg c{concurrency} {PROTOCOL}", ratio(stats.throughput, base.throughput),
                    "served pipeline / in-process decode + preprocess + ORT", stats.throughput, base.throughput,
                    "img/s", latency_notes(stats), {"served": stats.to_dict(), "inprocess": base.to_dict()})
            )  # fmt: skip
            if concurrency == 1:
                after = statistics(server, (pipeline, preprocess, model))
                case = f"{key} pipeline c1: where a request's time goes"
                rows.append(where_time_goes(SUITE, case, stats, before, after, pipeline, (preprocess, model)))
        ws.log(f"pipeline: client-side preprocessing + tensor request, {model} c4")
        client_side = run_load(
            lambda: _client_side(server.grpc_url, model, input_name, jpeg, spec),
            concurrency=4,
            duration_s=plan.window_s,
            max_requests=plan.max_requests,
            warmup=2,
        )
    rows.append(_small_model_overhead(ws))
    pipe4 = by_concurrency[4]
    rows.append(
        Row(SUITE, f"{key} pipeline vs client-side preprocessing c4 {PROTOCOL}",
            ratio(pipe4.throughput, client_side.throughput),
            "pipeline / client preprocess + tensor request throughput", pipe4.throughput, client_side.throughput,
            "img/s", latency_notes(client_side), {"pipeline": pipe4.to_dict(), "client_side": client_side.to_dict()})
    )  # fmt: skip
    rows.append(
        Row(SUITE, f"{key} bytes per request: float tensor / jpeg", ratio(pixels.nbytes, len(jpeg)),
            "request payload, tensor / encoded image", pixels.nbytes, len(jpeg), "bytes",
            f"{pixels.nbytes / 1e6:.2f} MB tensor vs {len(jpeg) / 1e3:.1f} kB JPEG")
    )  # fmt: skip
    return rows


def _client_side(url: str, model: str, input_name: str, jpeg: bytes, spec: Any) -> Any:
    """One thread's request function: decode and preprocess here, send the tensor to the plain model."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url.split("://", 1)[-1])

    def send() -> None:
        pixels = transform(decode_image(jpeg), spec)[None]
        tensor = grpcclient.InferInput(input_name, list(pixels.shape), "FP32")
        tensor.set_data_from_numpy(pixels)
        client.infer(model, [tensor])

    return send


def statistics(server: TritonServer, models: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Cumulative count and nanoseconds per phase, per model, from Triton's statistics extension."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url.split("://", 1)[-1])
    out = {}
    for name in models:
        stats = client.get_inference_statistics(name, as_json=True)["model_stats"][0]
        inference = stats.get("inference_stats", {})
        out[name] = {
            "requests": float(inference.get("success", {}).get("count", 0)),
            **{phase: float(inference.get(phase, {}).get("ns", 0)) for phase in PHASES},
        }
    client.close()
    return out


PHASES = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def where_time_goes(
    suite: str, case: str, client: LoadStats, before: dict, after: dict, top: str, steps: tuple[str, ...]
) -> Row:
    """Per request at concurrency 1: the client's mean latency split into the server's time for `top` (the model
    the client called) and the rest (client encoding, transport, response decoding), and the server's time into
    queue and compute per model of `steps` (the ensemble's own share is what remains)."""
    per: dict[str, dict[str, float]] = {}
    for name in after:
        count = after[name]["requests"] - before[name]["requests"]
        per[name] = {p: (after[name][p] - before[name][p]) / max(count, 1) / 1e6 for p in PHASES}
    server_ms = per[top]["success"]
    client_ms = client.mean_ms
    parts = {"client encode + transport + response": client_ms - server_ms}
    for name in steps:
        parts[f"{name} queue"] = per[name]["queue"]
        parts[f"{name} compute input/infer/output"] = sum(per[name][p] for p in PHASES[2:])
    if top not in steps:
        parts["ensemble overhead"] = server_ms - sum(v for k, v in parts.items() if not k.startswith("client"))
    notes = "ms per request: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    outside = ratio(client_ms - server_ms, client_ms)
    data = {"per_model": per, "parts_ms": parts}
    return Row(suite, case, outside, "share of latency outside the server", client_ms, server_ms, "ms", notes, data,
               better=None)  # fmt: skip


def _small_model_overhead(ws: Workspace) -> Row:
    """The small model at batch 1, concurrency 1, plain tensor requests: where its fixed per-request cost goes."""
    key = ws.plan.small_model
    repo = ws.repo(f"{SUITE}-{key}")
    model = ws.publish(repo, key)
    inputs = sample_inputs(ws.export(key), 1)
    outputs = reference_outputs(ws.export(key).artifact_path("onnx"), inputs)
    with TritonServer(repo) as server:
        ws.log(f"pipeline: {model} b1 c1, per-request breakdown")
        before = statistics(server, (model,))
        stats = served(server, PROTOCOL, model, inputs, outputs, ws.plan)
        after = statistics(server, (model,))
    return where_time_goes(
        SUITE, f"{key} onnx b1 c1: where a request's time goes", stats, before, after, model, (model,)
    )
