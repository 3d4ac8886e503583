"""The bottom layer: what every other layer agrees on. Errors, JSON files, the I/O spec, the manifest, artifact
kinds and file names, dtype tables, naming rules, runtime targets, staged writes. Imports nothing above it."""
