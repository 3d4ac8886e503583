"""The runner of one artifact file of an export, as `modelship parity` runs it: the loader its format registered
(registry.ARTIFACT_RUNNERS, from each format's runner.py) takes the file, its manifest entry and whether ONNX
Runtime runs in a worker process of its own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from modelship.contract.manifest import Artifact
from modelship.export.formats.onnx import runner as onnx_runner  # noqa: F401 (the built-in loaders register)
from modelship.export.formats.pt2 import runner as pt2_runner  # noqa: F401
from modelship.export.formats.registry import ARTIFACT_RUNNERS
from modelship.export.formats.torchscript import runner as torchscript_runner  # noqa: F401
from modelship.parity.runner_protocol import Runner


@contextlib.contextmanager
def artifact_runner(folder: Path, artifact: Artifact, *, isolated: bool = True) -> Iterator[Runner]:
    """The runner of one artifact file of an export, closed afterwards."""
    runner = ARTIFACT_RUNNERS.find(artifact.format)(folder / artifact.file, artifact, isolated)
    try:
        yield runner
    finally:
        runner.close()
