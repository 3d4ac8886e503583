"""A baseline: the compact figures of one run of one or more suites (each row's ratio, its spread and which way it
improves; the machine's CPU and package versions), kept as small JSON under benchmarks/baselines/ and compared
with a new run by `compare`. Only `read_baseline` and `write_baseline` touch files."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from modelship.bench.report import MachineInfo, Report, Row
from modelship.contract.json_object import JsonObject

SCHEMA = 1


@dataclass(frozen=True)
class Machine:
    """What makes two runs' ratios comparable: the CPU, how many cores, Python and the packages that measure (of a
    run's MachineInfo, what a baseline keeps)."""

    cpu: str
    cores: int
    python: str
    packages: dict[str, str]

    @classmethod
    def from_info(cls, info: MachineInfo) -> Machine:
        cpu = info.cpu_model or info.processor or "unknown"
        return cls(cpu, info.cpus or 0, info.python, dict(info.versions))

    def differences(self, other: Machine) -> list[str]:
        """What differs from `other`, one phrase each ("cores 2 -> 16", "torch 2.14.1 -> 2.15.0")."""
        facts = (
            ("CPU", self.cpu, other.cpu),
            ("cores", self.cores, other.cores),
            ("Python", self.python, other.python),
        )
        found = [f"{name} {mine} -> {theirs}" for name, mine, theirs in facts if mine != theirs]
        for package in sorted(set(self.packages) | set(other.packages)):
            mine, theirs = self.packages.get(package, "absent"), other.packages.get(package, "absent")
            if mine != theirs:
                found.append(f"{package} {mine} -> {theirs}")
        return found


@dataclass(frozen=True)
class BaselineRow:
    """One row's figures: `ratio` (the median of its interleaved pairs, or one measurement) and `spread`, the
    relative standard error of that median (0 for a row measured once: no spread known); `lo`-`hi` the pairs'
    range; `measured` and `reference` the absolute figures behind the ratio, in `unit`."""

    suite: str
    case: str
    ratio: float
    spread: float
    pairs: int
    lo: float
    hi: float
    better: str
    ratio_of: str
    measured: float | None
    reference: float | None
    unit: str
    flags: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return self.suite, self.case

    @property
    def name(self) -> str:
        return f"{self.suite}/{self.case}"

    @classmethod
    def from_row(cls, row: Row) -> BaselineRow | None:
        """The row's figures; None when it has no ratio (a peer that could not run, a failed cross-check) or is a
        detail not judged against a baseline (`better` None)."""
        if row.ratio is None or row.better is None:
            return None
        ratios = row.data.get("ratios") or [row.ratio]
        spread = row.data.get("relative_error", 0.0) if len(ratios) > 1 else 0.0
        return cls(
            suite=row.suite,
            case=row.case,
            ratio=round(row.ratio, 4),
            spread=round(spread, 4),
            pairs=len(ratios),
            lo=round(min(ratios), 4),
            hi=round(max(ratios), 4),
            better=row.better,
            ratio_of=row.ratio_of,
            measured=_significant(row.value),
            reference=_significant(row.baseline),
            unit=row.unit,
            flags=tuple(flag.split(":", 1)[0] for flag in row.flags),  # "unstable", "measurement fault", ...
        )


@dataclass(frozen=True)
class Baseline:
    """The rows of one run of `suites` (`quick`: with --quick), when it started, how long they took, where it ran."""

    suites: tuple[str, ...]
    quick: bool
    started: str
    seconds: float
    machine: Machine
    rows: tuple[BaselineRow, ...]

    def __post_init__(self) -> None:
        names = [row.name for row in self.rows]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"rows must have distinct names, these appear twice: {', '.join(twice)}")

    @classmethod
    def from_report(cls, report: Report) -> Baseline:
        rows = tuple(filter(None, (BaselineRow.from_row(row) for row in report.rows)))
        suites = tuple(report.suites) or tuple(dict.fromkeys(row.suite for row in report.rows))
        machine = Machine.from_info(report.machine)
        return cls(suites, report.quick, report.started, round(report.seconds, 1), machine, rows)

    def only(self, suite: str, seconds: float | None = None) -> Baseline:
        """The rows of one suite, which took `seconds` (a baseline file holds one suite: `baseline_file`)."""
        rows = tuple(row for row in self.rows if row.suite == suite)
        took = self.seconds if seconds is None else round(seconds, 1)
        return Baseline((suite,), self.quick, self.started, took, self.machine, rows)

    def to_dict(self) -> JsonObject:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: JsonObject) -> Baseline:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"baseline schema {data.get('schema')!r}, this modelship reads {SCHEMA}")
        rows = tuple(BaselineRow(**{**row, "flags": tuple(row.get("flags", ()))}) for row in data["rows"])
        machine = Machine(**data["machine"])
        return cls(tuple(data["suites"]), data["quick"], data["started"], data["seconds"], machine, rows)


def baseline_file(suite: str, quick: bool) -> str:
    """The file name of `suite`'s baseline in a baselines folder: `<suite>-quick.json` or `<suite>.json`."""
    return f"{suite}{'-quick' if quick else ''}.json"


def read_baseline(path: Path) -> Baseline:
    return Baseline.from_dict(json.loads(Path(path).read_text()))


def write_baseline(baseline: Baseline, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(baseline.to_dict(), indent=1) + "\n")
    return path


def _significant(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")
