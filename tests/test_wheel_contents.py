"""The wheel holds every module and data file of the checkout's package folders (pyproject.toml lists its packages
by hand, through package-dir: a folder left off the list is missing only where users install, never in the editable
checkout the other tests run; `modelship.export.formats` was)."""

from __future__ import annotations

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
