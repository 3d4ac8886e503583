"""Options and shared fixtures of the parity suite.

    pytest parity_tests                              # the fast zoo (< 8 min on 2 cores) + breakage tests
    pytest parity_tests --zoo full                   # every architecture (< 20 min)
    pytest parity_tests --zoo none --checkpoints ci-checkpoints   # only your own checkpoints
    pytest parity_tests --parity-reports out/        # where each parity.json goes (default parity-reports/)

Each export is built once per session (session-scoped cache) with the real CLI, in-process through click's
CliRunner, and every `modelship parity` report is kept under the reports folder for CI to upload.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from .own_checkpoints import read_checkpoints
from .zoo import ZOOS, ZooEntry, build_checkpoint, export_args

CHECKED: list[tuple[str, dict[str, Any]]] = []  # (run name, `modelship parity --json` payload), for the summary
PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "camera.png")  # sizes vary; camera is gray


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modelship parity suite")
    group.addoption(
        "--zoo",
        choices=sorted(ZOOS),
        default="fast",
        help="Architectures to export and check: fast (CI), full (adds the large models), none (own checkpoints "
        "only). Default: fast.",
    )
    group.addoption(
        "--checkpoints",
        metavar="DIR",
        default=os.environ.get("MODELSHIP_CHECKPOINTS"),
        help="Also export and check your own checkpoints: DIR holds them and a checkpoints.toml giving each one's "
        "export-model arguments (docs/parity.md). Default: $MODELSHIP_CHECKPOINTS.",
    )
    group.addoption(
        "--parity-reports",
        metavar="DIR",
        default="parity-reports",
        help="Folder for every parity report (JSON), relative to the repository root. Default: parity-reports.",
    )


def pytest_configure(config: pytest.Config) -> None:
    # the suite's own marks, so an installed suite (no repository pytest config) knows them too
    config.addinivalue_line("markers", "slow: takes more than a few seconds (still part of the default run)")
    config.addinivalue_line("markers", "heavy: the full zoo's large models (--zoo full)")
    folder = config.getoption("checkpoints")
    if folder:
        try:
            config._own_checkpoints = read_checkpoints(Path(folder))  # type: ignore[attr-defined]
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        sys.path.insert(0, str(Path(folder).resolve()))  # a models.py beside the checkpoints is importable
    else:
        config._own_checkpoints = []  # type: ignore[attr-defined]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "zoo_entry" in metafunc.fixturenames:
        entries = ZOOS[metafunc.config.getoption("zoo")]
        params = [pytest.param(e, marks=[pytest.mark.heavy] if e.zoo == "full" else [], id=e.name) for e in entries]
        metafunc.parametrize("zoo_entry", params)
    if "own_checkpoint" in metafunc.fixturenames:
        entries = metafunc.config._own_checkpoints  # type: ignore[attr-defined]
        metafunc.parametrize("own_checkpoint", entries, ids=[e.name for e in entries])


def invoke(*args: str) -> tuple[int, dict[str, Any]]:
    """Run the real `modelship` CLI in-process with --json; the exit code and its one JSON object."""
    from modelship.cli.main import main

    result = CliRunner().invoke(main, [*args, "--json"])
    try:
        payload = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"modelship {' '.join(args)} printed no JSON:\n{result.output}") from result.exception
    return result.exit_code, payload


@pytest.fixture(scope="session")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real photographs (scikit-image's samples), of different sizes and modes."""
    import skimage

    folder = tmp_path_factory.mktemp("photos")
    for name in PHOTOS:
        shutil.copy(Path(skimage.__file__).parent / "data" / name, folder / name)
    return folder


@pytest.fixture(scope="session")
def reports_dir(pytestconfig: pytest.Config) -> Path:
    folder = Path(pytestconfig.getoption("parity_reports"))
    folder = folder if folder.is_absolute() else pytestconfig.rootpath / folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Exports:
    """Zoo exports, each built once per session: checkpoint -> export-model -> folder."""

    root: Path
    photos: Path
    built: dict[str, tuple[Path, dict[str, Any]]] = field(default_factory=dict)

    def get(self, entry: ZooEntry) -> tuple[Path, dict[str, Any]]:
        if entry.name not in self.built:
            checkpoint = build_checkpoint(entry, self.root, sorted(self.photos.iterdir()))
            code, payload = invoke("export", *export_args(entry, checkpoint, self.root / "exports"))
            assert code == 0 and payload["ok"], f"export-model failed for {entry.name}: {payload.get('error')}"
            self.built[entry.name] = (Path(payload["folder"]), payload)
        return self.built[entry.name]


@pytest.fixture(scope="session")
def zoo_exports(tmp_path_factory: pytest.TempPathFactory, photos: Path) -> Exports:
    return Exports(tmp_path_factory.mktemp("zoo"), photos)


@pytest.fixture(scope="session")
def parity(reports_dir: Path):
    """`parity(name, EXPORT_DIR, *args)`: run `modelship parity` with its report at reports_dir/name.json."""

    def run(name: str, folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
        code, payload = invoke("parity", str(folder), *args, "--report", str(reports_dir / f"{name}.json"))
        CHECKED.append((name, payload))
        return code, payload

    return run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per checked artifact: the worst error figures behind each verdict."""
    lines = [
        f"{name:34} {report['candidate']:18} {_worst(report, 'max_abs', max):>9} {_worst(report, 'cosine', min):>9} "
        f"{_worst(report, 'top1_agreement', min):>6}  {'PASS' if report['passed'] else 'FAIL'}"
        for name, payload in CHECKED
        for report in payload.get("reports", [])
    ]
    if lines:
        terminalreporter.section("parity figures")
        terminalreporter.write_line(f"{'run':34} {'artifact':18} {'max abs':>9} {'cosine':>9} {'top-1':>6}  verdict")
        for line in lines:
            terminalreporter.write_line(line)


def _worst(report: dict[str, Any], key: str, pick: Any) -> str:
    values = [o[key] for o in report.get("outputs", []) if o.get(key) is not None]
    return f"{pick(values):.3g}" if values else "-"


def assert_all_passed(payload: dict[str, Any], artifacts: list[str], batch_sizes: set[int]) -> None:
    """Every artifact has a passing report, every input set passed, and at least the given batch sizes ran."""
    reports = {r["candidate"]: r for r in payload["reports"]}
    assert sorted(reports) == sorted(artifacts), f"reports for {sorted(reports)}, artifacts {sorted(artifacts)}"
    for name, report in reports.items():
        failed = [b["label"] for b in report["per_batch"] if not b["passed"]]
        assert report["passed"] and not failed, f"{name} failed on {failed}: {report['error'] or report['outputs']}"
        assert batch_sizes <= set(report["batch_sizes"]), f"{name} ran batch sizes {report['batch_sizes']}"
    assert payload["ok"], payload.get("error")
