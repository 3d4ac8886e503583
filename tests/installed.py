"""modelship as a user installs it, for tests that must not see the checkout: a wheel built from this tree (tracked
and untracked files git does not ignore, copied out first so the build writes nothing here), installed (not
editable) into a fresh virtual environment outside the checkout. Its dependencies are the test environment's,
reached through a .pth file that lists that site-packages folder as a path only: the folder's own .pth files (the
editable install's finder among them) are not run, so `import modelship` finds the wheel's copy and nothing else.

`.ci/journey` proves the same with every dependency installed from the registry, as a user does."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Installed:
    """The fresh environment: its folder, and the environment variables that run its commands first."""

    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env(self) -> dict[str, str]:
        """This process's environment with the venv's bin first on PATH, the checkout's environment's bin removed,
        and no PYTHONPATH."""
        ours = str(Path(sys.executable).parent)
        path = [str(self.bin), *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return env | {"PATH": os.pathsep.join(path), "VIRTUAL_ENV": str(self.venv)}


_INSTALLED: list[Installed] = []


def installed_modelship() -> Installed:
    """The environment, built once per test session (about 15 s)."""
    if not _INSTALLED:
        base = Path(tempfile.mkdtemp(prefix="modelship-installed-"))
        atexit.register(shutil.rmtree, base, ignore_errors=True)
        _INSTALLED.append(_install(base))
    return _INSTALLED[0]


def _install(base: Path) -> Installed:
    source, dist, venv = base / "src", base / "dist", base / "venv"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)], check=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    installed = Installed(venv)
    (wheel,) = dist.glob("modelship-*.whl")
    env = installed.env()
    subprocess.run([str(installed.python), *pip[1:], "install", "--no-deps", str(wheel)], check=True, env=env)
    site = subprocess.run(
        [str(installed.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    (Path(site) / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return installed
