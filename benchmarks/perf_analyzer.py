"""Triton's own load generator, perf_analyzer 2.51, set up in its own environment and driven from Python.

perf_analyzer from PyPI `perf-analyzer` (2.58+) needs glibc 2.38 and does not run on older systems. The
`tritonclient==2.51.0` wheel ships a 2.51 binary that does, once it can find `libb64.so.0d` and `libcudart.so.12`:
nvidia-pytriton bundles both (`nvidia_pytriton.libs/`). So the binary is installed with `--no-deps` into a venv of
its own (the project keeps its newer tritonclient), and the two libraries are symlinked into `<venv>/libs`, which
goes on LD_LIBRARY_PATH. Results come back through perf_analyzer's CSV report (`-f`), latencies in microseconds.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from filelock import FileLock

from modelship.serve.load.stats import LoadStats
from modelship.serve.protocols import WireProtocol

VERSION = "2.51.0"
DEFAULT_HOME = Path.home() / ".cache" / "modelship" / "perf_analyzer-venv"
# symlink name perf_analyzer looks for -> glob of the copy nvidia-pytriton bundles
LIBRARIES = {"libb64.so.0d": "libb64-*.so.0d", "libcudart.so.12": "libcudart-*.so.12*"}


# The CSV has no average-latency column; perf_analyzer's average is the sum of these parts (microseconds).
LATENCY_PARTS = (
    "Client Send",
    "Network+Server Send/Recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
)


class SharedMemory(StrEnum):
    """perf_analyzer's `--shared-memory`: where request and response tensors travel (NONE: in the messages)."""

    NONE = "none"
    SYSTEM = "system"
    CUDA = "cuda"


class PerfAnalyzerUnavailable(RuntimeError):
    """perf_analyzer could not be installed or does not run here; callers fall back to the Python load generator."""


@dataclass(frozen=True)
class PerfAnalyzer:
    """A runnable perf_analyzer binary and the environment it needs."""

    binary: Path
    library_dir: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.library_dir), env.get("LD_LIBRARY_PATH")) if p)
        return env

    def version(self) -> str:
        out = subprocess.run(
            [str(self.binary), "--version"], env=self.env(), capture_output=True, text=True, timeout=30, check=False
        )
        return (out.stdout + out.stderr).strip()

    def measure(
        self,
        *,
        model: str,
        url: str,
        protocol: WireProtocol,
        batch: int,
        concurrency: int,
        shape: dict[str, tuple[int, ...]] | None = None,
        shared_memory: SharedMemory = SharedMemory.NONE,
        output_shared_memory_size: int | None = None,
        window_ms: int = 3000,
        stability_percent: int = 20,
        max_trials: int = 5,
        timeout_s: float = 300,
    ) -> LoadStats:
        """One concurrency level against a running server; `url` is host:port of the HTTP or gRPC endpoint."""
        with tempfile.TemporaryDirectory(prefix="modelship-pa-") as tmp:
            report = Path(tmp) / "report.csv"
            cmd = [
                str(self.binary),
                "-m", model,
                "-u", url.split("://", 1)[-1],
                "-i", protocol,
                "-b", str(batch),
                f"--concurrency-range={concurrency}:{concurrency}",
                "--measurement-mode=time_windows",
                f"--measurement-interval={window_ms}",
                f"--stability-percentage={stability_percent}",
                f"--max-trials={max_trials}",
                "--input-data=random",
                f"--shared-memory={shared_memory}",
                "-f", str(report),
            ]  # fmt: skip
            for name, dims in (shape or {}).items():
                cmd.append(f"--shape={name}:{','.join(map(str, dims))}")
            if output_shared_memory_size is not None:
                cmd.append(f"--output-shared-memory-size={output_shared_memory_size}")
            done = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=timeout_s, check=False)
            if done.returncode != 0 or not report.is_file():
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                raise RuntimeError(f"perf_analyzer failed (exit {done.returncode}): {' | '.join(tail)}")
            rows = parse_csv(report.read_text(), batch=batch)
        return rows[-1]


def parse_csv(text: str, *, batch: int) -> list[LoadStats]:
    """Rows of a perf_analyzer `-f` report as LoadStats (its latency columns are microseconds)."""
    reader = csv.DictReader(io.StringIO(text.strip()))
    wanted = ("Concurrency", "Inferences/Second", "p50 latency", "p95 latency", "p99 latency", *LATENCY_PARTS)
    missing = [c for c in wanted if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"perf_analyzer CSV lacks columns {missing}; header was {reader.fieldnames}")
    rows = []
    for row in reader:
        rows.append(
            LoadStats(
                batch=batch,
                concurrency=int(row["Concurrency"]),
                throughput=float(row["Inferences/Second"]),
                p50_ms=float(row["p50 latency"]) / 1e3,
                p95_ms=float(row["p95 latency"]) / 1e3,
                p99_ms=float(row["p99 latency"]) / 1e3,
                mean_ms=sum(float(row[part]) for part in LATENCY_PARTS) / 1e3,
                source="perf_analyzer",
            )
        )
    if not rows:
        raise ValueError("perf_analyzer CSV holds no measurement rows")
    return rows


def bundled_library_dir() -> Path:
    """nvidia-pytriton's folder of bundled shared libraries (`<site-packages>/nvidia_pytriton.libs`)."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise PerfAnalyzerUnavailable("nvidia-pytriton is not installed: it provides libb64 and libcudart")
    return Path(next(iter(spec.submodule_search_locations))).parent / "nvidia_pytriton.libs"


def ensure_perf_analyzer(home: Path | None = None, *, install: bool = True) -> PerfAnalyzer:
    """Find perf_analyzer 2.51 in `home` (default ~/.cache/modelship/perf_analyzer-venv), installing it if allowed.

    Raises PerfAnalyzerUnavailable when it is absent and cannot be installed (no package index) or does not run.
    """
    home = Path(home or os.environ.get("MODELSHIP_PERF_ANALYZER_VENV") or DEFAULT_HOME)
    home.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home) + ".lock", timeout=600):
        binary = home / "bin" / "perf_analyzer"
        if not binary.is_file():
            if not install:
                raise PerfAnalyzerUnavailable(f"perf_analyzer is not installed in {home}")
            _install(home)
        library_dir = home / "libs"
        _link_libraries(library_dir)
    analyzer = PerfAnalyzer(binary, library_dir)
    try:
        version = analyzer.version()
    except (OSError, subprocess.SubprocessError) as exc:
        raise PerfAnalyzerUnavailable(f"{binary} does not run: {exc}") from None
    if VERSION not in version:
        raise PerfAnalyzerUnavailable(f"{binary} does not run or is not {VERSION}: {version[-200:]!r}")
    return analyzer


def _install(home: Path) -> None:
    steps = (
        [sys.executable, "-m", "venv", "--clear", str(home)],
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", f"tritonclient=={VERSION}"],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise PerfAnalyzerUnavailable(f"installing perf_analyzer failed: {' '.join(step)}: {done.stderr[-300:]}")


def _link_libraries(library_dir: Path) -> None:
    source = bundled_library_dir()
    library_dir.mkdir(parents=True, exist_ok=True)
    for name, pattern in LIBRARIES.items():
        found = sorted(source.glob(pattern))
        if not found:
            raise PerfAnalyzerUnavailable(f"{source} has no {pattern} (needed as {name})")
        link = library_dir / name
        if link.is_symlink() or link.exists():
            if link.resolve() == found[0].resolve():
                continue
            link.unlink()
        link.symlink_to(found[0])
