"""`python -m modelship.demo` (what `make demo` runs): the whole journey, end to end, in a temporary folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[1]


def test_demo_trains_exports_publishes_serves_and_classifies(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modelship.demo", "--workdir", str(tmp_path), "--samples", "10"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all 8 model/protocol pairs agree on every image: True" in done.stdout
    assert "all 2 passed parity against eager" in done.stdout
    assert "triton:digits_pipeline vs eager: PASS" in done.stdout  # photo files -> server-side preprocessing
    assert '"outputs":[{"name":"logits"' in done.stdout  # curl's answer: score:index:label classes
    assert sorted(p.name for p in (tmp_path / "model_repo").iterdir() if p.is_dir()) == [
        "digits_onnx",
        "digits_onnx_fp16",
        "digits_pipeline",
        "digits_preprocess",
        "digits_torchscript",
        "digits_torchscript_fp16",
    ]
