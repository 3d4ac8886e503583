"""Load on a served model: one request per call (requests), N clients back to back (loadgen), the latency and
throughput they reached (stats). Used by `modelship tune` and by the benchmarks."""
