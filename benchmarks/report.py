"""Benchmark results: one row per measured comparison, printed as ONE table (ratios first) and written as JSON
to a folder outside the checkout (`results_dir`)."""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from rich.console import JustifyMethod
from rich.table import Table

from modelship.contract.json_object import JsonObject

# which way a ratio improves: "higher" (served / in-process), "lower" (tool / bare calls, rollout time), "one" (a
# check of the method: two ways of measuring the same thing should agree); None: a detail that is not judged
# against a baseline (where a request's time goes, one export step of a second)
BETTER = ("higher", "lower", "one", None)


@dataclass
class Row:
    """One comparison: `ratio` = `value` / `baseline`, both measured in the same run; `ratio_of` says what over what.

    `case` names what was measured (model, format, batch, concurrency, protocol...); `notes` is a short human
    string (latency percentiles...); `data` holds every figure behind the row for the JSON report, already JSON (what
    the suite measured, by its measurements' own `to_dict`; read back as written); `flags` say why a ratio is not a
    result (a measurement fault, an unstable point); `better` which way the ratio improves (BETTER).
    """

    suite: str
    case: str
    ratio: float | None
    ratio_of: str
    value: float | None
    baseline: float | None
    unit: str
    notes: str = ""
    data: JsonObject = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # why the ratio is not to be trusted (measurement fault, unstable)
    better: str | None = "higher"

    def __post_init__(self) -> None:
        if not self.suite or not self.case:
            raise ValueError("a result row needs a suite and a case")
        if self.ratio is not None and not math.isfinite(self.ratio):
            raise ValueError(f"{self.suite}/{self.case}: ratio must be finite, got {self.ratio}")
        if self.better not in BETTER:
            raise ValueError(f"{self.suite}/{self.case}: better must be one of {BETTER}, got {self.better!r}")


@dataclass(frozen=True)
class MachineInfo:
    """The facts that make two benchmark runs comparable (or not), as `machine_info` found them when a run started:
    the cores, the CPU's model (None in a run written before it was recorded), the load average, the platform, the
    processor, Python and the versions of the packages that measure."""

    cpus: int | None
    cpu_model: str | None
    load_average: list[float] | None
    platform: str
    processor: str
    python: str
    versions: dict[str, str]

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> MachineInfo:
        return cls(**{"cpu_model": None, **data})


@dataclass
class Report:
    """Every row of one `modelship bench` run, with what is needed to compare runs (machine, versions, mode)."""

    rows: list[Row]
    quick: bool
    started: str
    seconds: float
    machine: MachineInfo
    errors: dict[str, str] = field(default_factory=dict)
    suites: list[str] = field(default_factory=list)
    suite_seconds: dict[str, float] = field(default_factory=dict)  # each suite's own time (`seconds`: the run's)

    def to_dict(self) -> JsonObject:
        return {
            "started": self.started,
            "seconds": round(self.seconds, 2),
            "quick": self.quick,
            "suites": self.suites,
            "suite_seconds": {name: round(seconds, 1) for name, seconds in self.suite_seconds.items()},
            "machine": self.machine.to_dict(),
            "errors": self.errors,
            "rows": [asdict(row) for row in self.rows],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Report:
        rows = [Row(**row) for row in data["rows"]]
        suites = data.get("suites") or list(dict.fromkeys(row.suite for row in rows))
        timed = data.get("suite_seconds", {})
        machine = MachineInfo.from_dict(data["machine"])
        return cls(rows, data["quick"], data["started"], data["seconds"], machine, data["errors"], suites, timed)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> MachineInfo:
    """The facts that make two benchmark runs comparable (or not)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("torch", "onnxruntime-gpu", "onnxruntime", "tritonclient", "nvidia-pytriton", "numpy"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    return MachineInfo(
        cpus=os.cpu_count(),
        cpu_model=cpu_model(),
        load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        platform=platform.platform(),
        processor=platform.processor() or platform.machine(),
        python=platform.python_version(),
        versions=versions,
    )


def format_number(value: float | None) -> str:
    """Three significant figures, no scientific notation for the magnitudes benchmarks produce."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, 2 - magnitude)
    return f"{value:,.{decimals}f}"


def render_table(report: Report) -> Table:
    """The one table `modelship bench` prints: ratio and what it compares first, then the absolute figures."""
    mode = "quick" if report.quick else "full"
    load = report.machine.load_average
    subtitle = f"{report.machine.cpus} CPUs, load {load[0]:.2f}" if load else ""
    table = Table(title=f"modelship bench ({mode}, {report.seconds:.0f} s)", caption=subtitle, show_lines=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("ratio", "right"),
        ("ratio of", "left"),
        ("suite", "left"),
        ("case", "left"),
        ("measured", "right"),
        ("baseline", "right"),
        ("unit", "left"),
        ("notes", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, overflow="fold")
    for row in report.rows:
        table.add_row(
            "-" if row.ratio is None else f"{row.ratio:.2f}",
            row.ratio_of,
            row.suite,
            row.case,
            format_number(row.value),
            format_number(row.baseline),
            row.unit,
            "; ".join([row.notes, *(f"[red]{flag}[/]" for flag in row.flags)]) if row.flags else row.notes,
        )
    return table


def results_dir() -> Path:
    """Where `modelship bench` writes its raw runs unless told otherwise: the user's cache, never the checkout
    ($XDG_CACHE_HOME/modelship/bench, else ~/.cache/modelship/bench)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "modelship" / "bench"


def result_stem(started: datetime, *, quick: bool, suites: tuple[str, ...] = ()) -> str:
    """File name stem for a run: `<date>-<time>`, then `quick` for `--quick`, then the suites when only some ran."""
    return "-".join([started.strftime("%Y-%m-%d-%H%M%S"), *(["quick"] if quick else []), *suites])


def write_json(report: Report, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    return path


def read_json(path: Path) -> Report:
    """A run `write_json` wrote."""
    return Report.from_dict(json.loads(Path(path).read_text()))
