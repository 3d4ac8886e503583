from __future__ import annotations

import threading
import time

import pytest

from modelship.serve.load.loadgen import run_load
from modelship.serve.load.requests import PROTOCOLS, Variant, parse_protocol, sender
from modelship.serve.load.stats import LoadStats, ratio, summarize
from modelship.serve.protocols import WireProtocol


def test_summarize_percentiles_and_throughput() -> None:
    latencies = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    stats = summarize(latencies, elapsed_s=2.0, batch=8, concurrency=4)
    assert stats.requests == 100
    assert stats.throughput == pytest.approx(100 * 8 / 2.0)
    assert stats.p50_ms == pytest.approx(50.5)
    assert stats.p95_ms == pytest.approx(95.05)
    assert stats.p99_ms == pytest.approx(99.01)
    assert stats.mean_ms == pytest.approx(50.5)
    assert stats.to_dict()["source"] == "loadgen"


def test_summarize_rejects_empty_and_stats_validate() -> None:
    with pytest.raises(ValueError):
        summarize([], elapsed_s=1.0, batch=1, concurrency=1)
    with pytest.raises(ValueError):
        LoadStats(batch=0, concurrency=1, throughput=1.0, p50_ms=1, p95_ms=1, p99_ms=1, mean_ms=1)


def test_ratio_handles_missing_sides() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None
    assert ratio(1.0, 0) is None


def test_a_load_protocol_is_a_wire_protocol_and_a_variant() -> None:
    assert parse_protocol(WireProtocol.GRPC) == (WireProtocol.GRPC, Variant.BINARY)
    assert parse_protocol("http-json") == (WireProtocol.HTTP, Variant.JSON)
    assert [parse_protocol(name)[1] for name in PROTOCOLS].count(Variant.SHM) == 2
    with pytest.raises(ValueError, match="protocol must be one of"):
        parse_protocol("grpc-json")
    with pytest.raises(ValueError, match="JSON tensors travel over http only, not grpc"):
        sender("127.0.0.1:8001", WireProtocol.GRPC, "model", {}, {}, Variant.JSON)


def test_run_load_is_bounded_by_count_and_uses_one_request_per_thread() -> None:
    made = []

    def make():
        made.append(threading.get_ident())
        return lambda: time.sleep(0.001)

    stats = run_load(make, concurrency=3, batch=2, duration_s=30, max_requests=20, warmup=1)
    assert stats.requests == 20
    assert stats.concurrency == 3 and stats.batch == 2
    assert len(set(made)) == 3
    assert stats.throughput == pytest.approx(20 * 2 / stats.elapsed_s)


def test_run_load_is_bounded_by_time() -> None:
    stats = run_load(lambda: lambda: time.sleep(0.01), concurrency=2, duration_s=0.2)
    assert 0.2 <= stats.elapsed_s < 5
    assert stats.requests >= 2


def test_run_load_closes_senders_and_reraises_the_first_error() -> None:
    closed = []

    class Failing:
        calls = 0

        def __call__(self):
            Failing.calls += 1
            if Failing.calls > 3:
                raise ConnectionError("server went away")

        def close(self):
            closed.append(True)

    with pytest.raises(ConnectionError, match="went away"):
        run_load(Failing, concurrency=2, duration_s=10, warmup=0)
    assert len(closed) == 2


def test_run_load_reports_a_failing_factory() -> None:
    def make():
        raise OSError("cannot connect")

    with pytest.raises(OSError, match="cannot connect"):
        run_load(make, concurrency=2, duration_s=1)
