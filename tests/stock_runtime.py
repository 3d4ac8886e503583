"""The runtimes inside the stock Triton container, installed here in their own cached virtual environments, to run
published artifacts as Triton's native backends would: ONNX Runtime for the onnxruntime backend, PyTorch for the
LibTorch backend, at the versions the Triton target says (export.opsets.runtime_target)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from filelock import FileLock

from modelship.checkpoint.fingerprint import cache_dir

# Run one model file on the inputs in an .npz; write its outputs (in the model's output order) to another .npz.
RUNNERS = {
    "onnxruntime": """
import sys, numpy as np, onnxruntime as ort
model, inputs, outputs = sys.argv[1:4]
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
values = session.run(None, dict(np.load(inputs)))
np.savez(outputs, **{f"{i}": v for i, v in enumerate(values)})
""",
    "torch": """
import sys, numpy as np, torch
model, inputs, outputs = sys.argv[1:4]
module = torch.jit.load(model, map_location="cpu").eval()
feeds = np.load(inputs)
with torch.inference_mode():
    result = module(*[torch.from_numpy(feeds[k]) for k in sorted(feeds.files, key=int)])
def flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    return [t for x in (v.values() if isinstance(v, dict) else v) for t in flat(x)]
np.savez(outputs, **{f"{i}": t.numpy() for i, t in enumerate(flat(result))})
""",
}


def stock_python(package: str, version: str) -> Path:
    """The interpreter of a cached venv holding `package==version` (and numpy<2), built on first use."""
    root = cache_dir() / "stock-runtimes" / f"{package}-{version}-py{sys.version_info.major}{sys.version_info.minor}"
    python = root / "bin" / "python"
    root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock", timeout=1800):
        if not (root / ".ready").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", f"{package}=={version}", "numpy<2"],
                check=True,
                env={k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"},
            )
            (root / ".ready").touch()
    return python


def run_stock(python: Path, runtime: str, model: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`model`'s outputs, in order, computed by the stock runtime in `python`."""
    with tempfile.TemporaryDirectory() as folder:
        feeds, results = Path(folder) / "in.npz", Path(folder) / "out.npz"
        if runtime == "onnxruntime":
            import onnx

            names = [i.name for i in onnx.load(str(model), load_external_data=False).graph.input]
            np.savez(feeds, **dict(zip(names, inputs, strict=True)))
        else:
            np.savez(feeds, **{str(i): array for i, array in enumerate(inputs)})
        subprocess.run([str(python), "-c", RUNNERS[runtime], str(model), str(feeds), str(results)], check=True)
        with np.load(results) as data:
            return [data[str(i)] for i in range(len(data.files))]
