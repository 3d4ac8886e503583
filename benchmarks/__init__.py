"""modelship bench: measure export, parity and serving side by side, and report ratios.

Every headline figure is a ratio of two measurements taken in the same run on the same machine (served vs
in-process throughput, tool vs bare library call), so a noisy or slow machine shifts both sides together.
`loadgen` (Python load generator) and `perf_analyzer` (Triton's own, 2.51) drive the server; `suites` hold the
measurements; `report` prints one table and writes a run's JSON; `baseline` keeps a run's compact figures and
`compare` judges a new run against them (benchmarks/README.md).
"""
