"""One import namespace: modelship installs as `modelship.*` only, so the `export.py`, `serve.py` and
`preprocess.py` that training repositories often hold never shadow it, even when `--arch module:Factory` puts the
current folder on the import path. Commands run as subprocesses from such a folder, as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BIN = Path(sys.executable).parent
SHADOWS = ("export", "serve", "preprocess", "checkpoint", "parity")
MODEL_SOURCE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.fixture(scope="module")
def training_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's folder: modules named like modelship's folders (each fails loudly if imported) and a model."""
    folder = tmp_path_factory.mktemp("training-repo")
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise SystemExit('the user module {name}.py was imported')\n")
    (folder / "mymodels.py").write_text(MODEL_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        from mymodels import Net  # type: ignore[import-not-found]

        torch.save(Net().state_dict(), folder / "net.pt")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("mymodels", None)
    return folder


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize(
    "command",
    [
        ["modelship", "--help"],
        ["export-model", "--help"],
        *(
            ["modelship", name, "--help"]
            for name in ("inspect", "export", "parity", "publish", "serve", "infer", "bench")
        ),
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_help_from_a_folder_with_shadowing_modules(training_repo: Path, command: list[str]) -> None:
    result = run(training_repo, str(BIN / command[0]), *command[1:])
    assert result.returncode == 0, result.stderr
    assert "was imported" not in result.stderr + result.stdout


@pytest.mark.slow
def test_export_publish_and_parity_from_a_folder_with_shadowing_modules(training_repo: Path) -> None:
    """--arch mymodels:Net puts the folder on the import path; export, parity and publish still use modelship's."""
    out = training_repo / "exports" / "net"
    exported = run(
        training_repo, str(BIN / "export-model"), "net.pt", "--arch", "mymodels:Net", "--input", "x:batch,4",
        "--onnx", "--out", str(out.parent), "--json",
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr + exported.stdout
    assert json.loads(exported.stdout)["ok"] is True
    checked = run(training_repo, str(BIN / "modelship"), "parity", str(out), "--arch", "mymodels:Net", "--json")
    assert checked.returncode == 0, checked.stderr + checked.stdout
    repo = training_repo / "repo"
    published = run(training_repo, str(BIN / "modelship"), "publish", str(out), "--repo", str(repo), "--json")
    assert published.returncode == 0, published.stderr + published.stdout
    assert (repo / "net_onnx" / "config.pbtxt").is_file()


def test_no_bare_top_level_packages_are_installed(tmp_path: Path) -> None:
    """From a neutral folder only `modelship` imports; the folder names are not packages of their own."""
    code = "import importlib.util as u, json; print(json.dumps({n: u.find_spec(n) is not None for n in %r}))"
    names = ("modelship", *SHADOWS)
    result = run(tmp_path, sys.executable, "-c", code % (names,))
    assert json.loads(result.stdout) == {"modelship": True, **dict.fromkeys(SHADOWS, False)}
