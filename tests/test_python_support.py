"""The supported Pythons are written once, as SUPPORTED in the Makefile; pyproject.toml, the README and the CI
example say the same, and `make setup` refuses, or falls back from, any other interpreter before installing.

The Makefile's interpreter check runs here against stand-in interpreters (tiny shell scripts), so no network and no
real environment is needed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent


def makefile_supported() -> list[str]:
    match = re.search(r"^SUPPORTED\s*:=\s*([^#\n]+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "Makefile: no `SUPPORTED := 3.X ...` line"
    return match.group(1).split()


def minor(version: str) -> int:
    major, minor_ = version.split(".")
    assert major == "3", version
    return int(minor_)


SUPPORTED = makefile_supported()


def test_supported_is_a_range_of_minor_versions():
    minors = [minor(v) for v in SUPPORTED]
    assert minors, "SUPPORTED is empty"
    assert minors == list(range(minors[0], minors[-1] + 1)), f"SUPPORTED {SUPPORTED} is not contiguous and ascending"


def test_pyproject_requires_python_and_classifiers_match():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    spec = SpecifierSet(project["requires-python"])
    allowed = [f"3.{n}" for n in range(30) if spec.contains(f"3.{n}.0") or spec.contains(f"3.{n}.99")]
    assert allowed == SUPPORTED, f"requires-python {spec} allows {allowed}, the Makefile supports {SUPPORTED}"
    classified = [c.removeprefix("Programming Language :: Python :: ") for c in project["classifiers"]]
    classified = sorted((c for c in classified if c.startswith("3.")), key=minor)
    assert classified == SUPPORTED


def test_readme_states_the_range():
    match = re.search(r"nothing but Python (3\.\d+)–(3\.\d+) on Linux", (ROOT / "README.md").read_text())
    assert match, "README.md: no 'nothing but Python 3.X–3.Y on Linux' sentence"
    assert [match.group(1), match.group(2)] == [SUPPORTED[0], SUPPORTED[-1]]


def test_ci_example_runs_every_supported_python():
    workflow = (ROOT / ".github" / "workflows" / "parity.yml").read_text()
    match = re.search(r"^\s*python-version:\s*\[([^\]]*)\]", workflow, re.MULTILINE)
    assert match, "parity.yml: no matrix python-version list"
    assert re.findall(r"[\d.]+", match.group(1)) == SUPPORTED
    assert "make test PYTHON=python${{ matrix.python-version }}" in workflow


# --- the Makefile's check, with stand-in interpreters --------------------------------------------------------------

FAKE = """#!/bin/sh
# a stand-in Python {version}: answers the Makefile's probe, makes a "venv" (a copy of itself), fakes pip
case "$1 $2" in
  "-c "*) echo "{version} $0" ;;
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
  "-m pip") [ "$FAKE_PIP" = ok ] ;;
  *) exit 1 ;;
esac
"""
NEWEST, OLDEST = SUPPORTED[-1], SUPPORTED[0]
TOO_NEW = f"3.{minor(NEWEST) + 1}"


@pytest.fixture
def project(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("rm", "mkdir", "cp", "touch"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, proj / name)
        os.utime(proj / name, (time.time() - 60, time.time() - 60))  # older than any stamp make will touch

    def python(name: str, version: str) -> None:
        path = bin_dir / name
        path.write_text(FAKE.format(version=version))
        path.chmod(0o755)

    def run(*args: str, pip: str = "ok") -> tuple[int, list[str], float]:
        env = {"PATH": str(bin_dir), "FAKE_PIP": pip}
        start = time.monotonic()
        done = subprocess.run([make, "--no-print-directory", *args], cwd=proj, env=env, capture_output=True, text=True)
        return done.returncode, (done.stdout + done.stderr).splitlines(), time.monotonic() - start

    python("python3", f"{TOO_NEW}.0")
    python(f"python{TOO_NEW}", f"{TOO_NEW}.0")
    return proj, python, run


def test_unsupported_python_and_no_other_stops_at_once_with_one_line(project):
    proj, _, run = project
    code, lines, seconds = run("demo")
    assert code != 0 and seconds < 5
    assert len(lines) == 1, lines
    assert f"python3 is Python {TOO_NEW}.0" in lines[0]
    assert f"Python {OLDEST}–{NEWEST}" in lines[0]
    assert f"`make demo PYTHON=python{NEWEST}`" in lines[0]
    assert not (proj / ".venv").exists()

    code, lines, _ = run("setup", "PYTHON=nosuch-python")
    assert code != 0 and len(lines) == 1 and "nosuch-python is not a Python that runs" in lines[0]


def test_falls_back_to_a_supported_python_and_a_failed_install_leaves_no_venv(project):
    proj, python, run = project
    python(f"python{NEWEST}", f"{NEWEST}.1")
    code, lines, _ = run("setup", f"PYTHON=python{TOO_NEW}", pip="fail")
    assert code != 0
    fallback = (
        f"make: python{TOO_NEW} is Python {TOO_NEW}.0, modelship needs Python {OLDEST}–{NEWEST}: using python{NEWEST}"
    )
    assert fallback in lines
    assert any("setup failed" in line and ".venv removed" in line for line in lines), lines
    assert not (proj / ".venv").exists()

    code, lines, _ = run("setup", f"PYTHON=python{TOO_NEW}")
    assert code == 0, lines
    assert (proj / ".venv" / ".installed").exists()


def test_a_venv_is_reused_only_when_finished_and_on_the_python_asked_for(project):
    proj, python, run = project
    python(f"python{NEWEST}", f"{NEWEST}.1")
    python(f"python{OLDEST}", f"{OLDEST}.7")
    assert run("setup", f"PYTHON=python{NEWEST}")[0] == 0
    stamp = proj / ".venv" / ".installed"

    code, lines, _ = run("setup")  # python3 is unsupported, but the finished .venv is on a supported Python
    assert (code, lines) == (0, [])

    later = stamp.stat().st_mtime + 10
    os.utime(proj / "constraints.txt", (later, later))
    code, lines, _ = run("setup", pip="fail")  # a failed update keeps .venv and its old stamp: tried again next time
    assert code != 0 and "make: updating .venv failed (see above); the next make tries again" in lines
    assert stamp.stat().st_mtime < later
    code, lines, _ = run("setup")
    assert code == 0 and lines == [f"make: updating .venv (Python {NEWEST}.1) to pyproject.toml and constraints.txt"]

    code, lines, _ = run("setup", f"PYTHON=python{OLDEST}")  # another Python asked for: built again
    assert code == 0
    assert len(lines) == 1 and lines[0].startswith(
        f"make: replacing .venv (Python {NEWEST}.1) with one on Python {OLDEST}.7 ("
    )

    stamp.unlink()  # as an interrupted install leaves it
    code, lines, _ = run("setup", f"PYTHON=python{OLDEST}")
    assert code == 0 and len(lines) == 1
    assert lines[0].startswith(f"make: replacing .venv (unfinished) with one on Python {OLDEST}.7 (")
    assert stamp.exists()
