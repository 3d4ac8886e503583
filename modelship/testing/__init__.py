"""Support for tests, parity suites and benchmarks: realistic random models and checkpoints in every form the
loader reads. Top layer: nothing in the product imports it."""
