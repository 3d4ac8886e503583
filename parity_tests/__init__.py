"""The parity suite CI runs: a zoo of architectures and the user's own checkpoints, exported with the real CLI and
checked with `modelship parity` (see docs/parity.md)."""
