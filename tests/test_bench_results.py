from __future__ import annotations

import json
from datetime import datetime

import pytest
from rich.console import Console

from modelship.bench.baseline import Machine
from modelship.bench.perf_analyzer import LIBRARIES, PerfAnalyzer, _link_libraries, parse_csv
from modelship.bench.report import (
    MachineInfo,
    Report,
    Row,
    format_number,
    read_json,
    render_table,
    result_stem,
    write_json,
)
from modelship.bench.tuning import read_config, set_intra_op_threads
from modelship.bench.workspace import GRPC, BenchPlan, load_protocols
from modelship.serve.load.requests import PROTOCOLS, parse_protocol

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
        Row("serving", "resnet50 onnx b8 c4 grpc", 0.91, "served / in-process throughput", 21.3, 23.4, "inf/s",
            data={"ratios": [0.9, 0.91, 0.93], "relative_error": 0.012}),
        Row("serving", "resnet50 onnx pytriton peer", None, "modelship / peer", None, None, "", "not installed"),
        Row("export", "resnet50 end to end", 0.96, "tool / bare library calls", 14.4, 14.9, "s", better="lower"),
    ]  # fmt: skip
    machine = MachineInfo(2, "Test CPU", [0.5, 0.4, 0.3], "Linux-6.1-x86_64", "x86_64", "3.11.7", {"torch": "2.14.1"})
    return Report(rows, quick=True, started="2026-01-02T03:04:05", seconds=12.5, machine=machine,
                  suites=["export", "serving"])  # fmt: skip


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
    with pytest.raises(ValueError, match="better"):
        Row("s", "c", 1.0, "", 1.0, 1.0, "s", better="faster")


def test_format_number() -> None:
    assert format_number(None) == "-"
    assert format_number(0.012345) == "0.0123"
    assert format_number(21.34) == "21.3"
    assert format_number(4321.9) == "4,322"


def test_a_run_is_written_and_read_back_under_a_name_that_never_overwrites(tmp_path) -> None:
    report = _report()
    started = datetime(2026, 1, 2, 3, 4, 5)
    assert result_stem(started, quick=True) == "2026-01-02-030405-quick"
    assert result_stem(started, quick=False, suites=("serving",)) == "2026-01-02-030405-serving"
    path = write_json(report, tmp_path / "run.json")
    data = json.loads(path.read_text())
    assert data["quick"] is True and data["suites"] == ["export", "serving"] and len(data["rows"]) == 3
    assert data["rows"][0]["ratio"] == 0.91 and data["rows"][2]["better"] == "lower"
    assert read_json(path) == report


def test_a_run_written_before_the_cpu_model_was_recorded_reads_back(tmp_path) -> None:
    data = _report().to_dict()
    del data["machine"]["cpu_model"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    machine = read_json(tmp_path / "old.json").machine
    assert machine.cpu_model is None and Machine.from_info(machine).cpu == "x86_64"  # the processor instead


def test_the_serving_suite_sets_one_published_configs_threads(tmp_path) -> None:
    model = tmp_path / "m_onnx"
    model.mkdir()
    (model / "config.pbtxt").write_text(
        'name: "m_onnx"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 16\n'
        "instance_group { count: 1 kind: KIND_CPU }\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"
    )
    config = set_intra_op_threads(model, 1)
    assert config.parameters["intra_op_thread_count"].string_value == "1"
    assert config.dynamic_batching.max_queue_delay_microseconds == 100 and config.instance_group[0].count == 1
    assert read_config(model) == config


def test_the_plan_holds_parsed_protocols_that_print_as_the_load_generators_names() -> None:
    for name, protocol in zip(PROTOCOLS, load_protocols(*PROTOCOLS), strict=True):
        assert (protocol.wire, protocol.variant) == parse_protocol(name) and f"{protocol}" == name
    assert [str(p) for p in BenchPlan.full().transport_protocols] == ["grpc", "http", "grpc-shm", "http-shm"]
    assert BenchPlan.quick_plan().protocols == (GRPC,) == load_protocols("grpc")
