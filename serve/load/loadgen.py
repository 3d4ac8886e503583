"""The project's own load generator: N threads send requests back to back, bounded by count and by time.

Each thread builds its own request function (its own client: tritonclient's HTTP client is not thread-safe), sends
its untimed warmup requests, then waits at a barrier so that every thread starts the timed window together.
The window ends at `duration_s` or after `max_requests` requests, whichever comes first; requests in flight at the
deadline complete and count. Threads suffice: clients and ONNX Runtime release the GIL while they wait or compute.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from modelship.serve.load.stats import LoadStats, summarize

Request = Callable[[], object]


def run_load(
    make_request: Callable[[], Request],
    *,
    concurrency: int = 1,
    batch: int = 1,
    duration_s: float = 5.0,
    max_requests: int | None = None,
    warmup: int = 1,
    warmup_s: float = 0.0,
    source: str = "loadgen",
) -> LoadStats:
    """Drive `concurrency` threads, each calling its own `make_request()` result in a loop; summarise latencies.

    `batch` is the number of samples one request carries (throughput is reported in samples per second). Each
    thread's untimed warmup is `warmup` requests, and more until `warmup_s` seconds have passed (so that the window
    starts on a steady machine: the first fraction of a second after a pause runs faster or slower than the rest).
    The first exception raised by any request stops every thread and is re-raised here.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if duration_s <= 0 or (max_requests is not None and max_requests < 1):
        raise ValueError("duration_s must be > 0 and max_requests >= 1")
    window: dict[str, float] = {}

    def start_window() -> None:
        window.setdefault("start", time.perf_counter())

    barrier = threading.Barrier(concurrency, action=start_window)
    stop = threading.Event()
    tickets = itertools.count()
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    finished = [0.0] * concurrency
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        send = None
        try:
            send = make_request()
            warm_until = time.perf_counter() + warmup_s
            for _ in range(warmup):
                send()
            while time.perf_counter() < warm_until:
                send()
            barrier.wait()
            deadline = window["start"] + duration_s
            mine = latencies[index]
            while not stop.is_set() and (max_requests is None or next(tickets) < max_requests):
                began = time.perf_counter()
                send()
                mine.append(time.perf_counter() - began)
                if time.perf_counter() >= deadline:
                    break
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:
            errors.append(exc)
            stop.set()
            barrier.abort()
        finally:
            finished[index] = time.perf_counter()
            close = getattr(send, "close", None)
            if callable(close):
                close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    elapsed = max(finished) - window["start"]
    merged = [lat for per_thread in latencies for lat in per_thread]
    return summarize(merged, elapsed_s=elapsed, batch=batch, concurrency=concurrency, source=source)
