from __future__ import annotations

import json
from datetime import datetime

import pytest
from rich.console import Console

from modelship.bench.perf_analyzer import LIBRARIES, PerfAnalyzer, _link_libraries, parse_csv
from modelship.bench.plot import plot_cost_growth
from modelship.bench.report import Report, Row, format_number, render_table, result_stem, write_json
from modelship.bench.suites.batching import scrape_counts
from modelship.bench.tuning import clone_model, read_config, tune_model

# What perf_analyzer 2.51 writes with -f (latencies in microseconds; no average column).
PA_CSV = """Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,\
Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency
2,402.206,20,2614,10534,60,25874,469,3,37563,75386,82011,87501
"""


def test_parse_perf_analyzer_csv() -> None:
    (stats,) = parse_csv(PA_CSV, batch=8)
    assert stats.concurrency == 2 and stats.batch == 8
    assert stats.throughput == pytest.approx(402.206)
    assert stats.p50_ms == pytest.approx(37.563)
    assert stats.p99_ms == pytest.approx(87.501)
    assert stats.mean_ms == pytest.approx((20 + 2614 + 10534 + 60 + 25874 + 469 + 3) / 1e3)
    assert stats.source == "perf_analyzer" and stats.requests is None


def test_parse_perf_analyzer_csv_rejects_other_reports() -> None:
    with pytest.raises(ValueError, match="lacks columns"):
        parse_csv("Concurrency,Inferences/Second\n1,2\n", batch=1)
    with pytest.raises(ValueError, match="no measurement rows"):
        parse_csv(PA_CSV.splitlines()[0], batch=1)


def test_perf_analyzer_libraries_are_linked_and_put_first_on_the_path(tmp_path, monkeypatch) -> None:
    bundled = tmp_path / "nvidia_pytriton.libs"
    bundled.mkdir()
    (bundled / "libb64-1234.so.0d").write_bytes(b"")
    (bundled / "libcudart-5678.so.12.6.77").write_bytes(b"")
    monkeypatch.setattr("modelship.bench.perf_analyzer.bundled_library_dir", lambda: bundled)
    libs = tmp_path / "venv" / "libs"
    _link_libraries(libs)
    _link_libraries(libs)  # idempotent
    for name in LIBRARIES:
        assert (libs / name).is_symlink()
    monkeypatch.setenv("LD_LIBRARY_PATH", "/elsewhere")
    env = PerfAnalyzer(tmp_path / "perf_analyzer", libs).env()
    assert env["LD_LIBRARY_PATH"] == f"{libs}:/elsewhere"


def _report() -> Report:
    rows = [
        Row("serving", "resnet50 onnx b8 c4 grpc", 0.91, "served / in-process throughput", 21.3, 23.4, "inf/s"),
        Row("startup", "empty repository", None, "", 0.12, None, "s"),
        Row("growth", "resnet18 b1 c1 grpc (size)", 1.2, "served / in-process p50 latency", 12.0, 10.0, "ms",
            data={"axis": "model", "model": "resnet18", "params_m": 11.7, "export_s": 8.0, "parity_s": 1.0,
                  "served_ms": 12.0, "inprocess_ms": 10.0}),
        Row("growth", "resnet50 b4 c1 grpc (batch)", 1.1, "served / in-process p50 latency", 44.0, 40.0, "ms",
            data={"axis": "batch", "model": "resnet50", "batch": 4, "params_m": 25.6, "served_ms": 44.0,
                  "inprocess_ms": 40.0}),
    ]  # fmt: skip
    return Report(rows, quick=True, started="2026-01-02T03:04:05", seconds=12.5, machine={"cpus": 2})


def test_table_puts_the_ratio_first() -> None:
    console = Console(width=200, record=True)
    console.print(render_table(_report()))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "ratio" in line)
    assert header.index("ratio") < header.index("suite") < header.index("measured")
    assert "0.91" in text and "21.3" in text


def test_row_rejects_non_finite_ratio() -> None:
    with pytest.raises(ValueError):
        Row("s", "c", float("inf"), "", 1.0, 0.0, "s")


def test_format_number() -> None:
    assert format_number(None) == "-"
    assert format_number(0.012345) == "0.0123"
    assert format_number(21.34) == "21.3"
    assert format_number(4321.9) == "4,322"


def test_json_and_plot_are_written(tmp_path) -> None:
    report = _report()
    stem = result_stem(datetime(2026, 1, 2), quick=True)
    assert stem == "2026-01-02-quick"
    assert result_stem(datetime(2026, 1, 2), quick=False, suites=("tuning",)) == "2026-01-02-tuning"
    path = write_json(report, tmp_path / f"{stem}.json")
    data = json.loads(path.read_text())
    assert data["quick"] is True and len(data["rows"]) == 4
    assert data["rows"][0]["ratio"] == 0.91
    figure = plot_cost_growth(report.rows, tmp_path / f"{stem}.png")
    assert figure is not None and figure.stat().st_size > 1000
    assert plot_cost_growth(report.rows[:2], tmp_path / "none.png") is None


def test_scrape_triton_metrics() -> None:
    text = """# HELP nv_inference_count Number of inferences performed
nv_inference_count{model="m_onnx",version="1"} 24
nv_inference_exec_count{model="m_onnx",version="1"} 8
nv_inference_count{model="other",version="1"} 3
nv_cpu_utilization 0.5
"""
    counts = scrape_counts(text)
    assert counts["m_onnx"] == {"nv_inference_count": 24.0, "nv_inference_exec_count": 8.0}
    assert counts["other"] == {"nv_inference_count": 3.0}


def test_clone_and_tune_a_published_config(tmp_path) -> None:
    source = tmp_path / "m_onnx"
    (source / "1").mkdir(parents=True)
    (source / "1" / "model.onnx").write_bytes(b"onnx")
    (source / "config.pbtxt").write_text(
        'name: "m_onnx"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 16\n'
        "instance_group { count: 1 kind: KIND_CPU }\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"
    )
    clone = clone_model(tmp_path, "m_onnx", "m_onnx_off")
    assert (clone / "1" / "model.onnx").read_bytes() == b"onnx"
    config = tune_model(clone, dynamic_batching=False, instances=2, intra_op_threads=1)
    assert config.name == "m_onnx_off"
    assert not config.HasField("dynamic_batching")
    assert config.instance_group[0].count == 2
    assert config.parameters["intra_op_thread_count"].string_value == "1"
    assert read_config(clone) == config
    delayed = tune_model(source, queue_delay_us=5000)
    assert delayed.dynamic_batching.max_queue_delay_microseconds == 5000
    assert read_config(source).name == "m_onnx"
