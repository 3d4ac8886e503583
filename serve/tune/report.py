"""What a tune shows: a table of every point measured, a plot of throughput against p99 with the budget line, the
default and the winner marked (PNG, matplotlib's Agg renderer: no display needed), and the report folder holding
both (tune.json: every point, as --json prints it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from modelship.contract.json_object import JsonObject
from modelship.serve.tune.measurement import Point
from modelship.serve.tune.run import TuneResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLOT = "tune.png"
REPORT = "tune.json"


def save(result: TuneResult, out: Path) -> JsonObject:
    """Write OUT/tune.json and the plot OUT/tune.png; what tune.json holds (the result, with where both went)."""
    payload = result.to_dict()
    out.mkdir(parents=True, exist_ok=True)
    payload["plot"] = str(plot(result, out / PLOT))
    payload["report"] = str(out / REPORT)
    (out / REPORT).write_text(json.dumps(payload, indent=2))
    return payload


def points_table(result: TuneResult) -> Table:
    winner, default, constraints = result.winner.best, result.default.best, result.request.constraints
    table = Table(title=f"tune {result.request.model}: every point measured ({constraints.describe()})")
    for column in ("", "config", "clients", "infer/s", "p50 ms", "p99 ms", "client CPU"):
        table.add_column(column, justify="right" if column in ("clients", "infer/s", "p50 ms", "p99 ms") else "left")
    for point in result.search.points:
        mark = "winner" if point == winner else "default" if point == default else ""
        style = "bold green" if mark == "winner" else "dim" if not constraints.judge(point).met else None
        table.add_row(
            mark,
            point.candidate.describe(),
            str(point.concurrency),
            f"{point.throughput:.1f}",
            f"{point.p50_ms:.1f}",
            f"{point.p99_ms:.1f}",
            f"{point.client_cpu:.2f}" + ("" if point.stable else " unstable"),
            style=style,
        )
    return table


def plot(result: TuneResult, path: Path) -> Path:
    """Throughput against p99 for every point; the budget as a vertical line; default and winner marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budget = result.request.constraints.p99_ms
    figure, axes = plt.subplots(figsize=(8, 5), dpi=110)
    points = result.search.points
    artifacts = sorted({p.candidate.artifact for p in points})
    for artifact in artifacts:
        mine = [p for p in points if p.candidate.artifact == artifact]
        axes.scatter([p.p99_ms for p in mine], [p.throughput for p in mine], s=18, alpha=0.7, label=artifact)
    axes.axvline(budget, color="crimson", linestyle="--", label=f"p99 budget {budget:g} ms")
    _mark(axes, result.default.best, "default", "black", "s")
    if not result.default_wins:
        _mark(axes, result.winner.best, "winner", "green", "*")
    axes.set_xlabel("p99 latency (ms)")
    axes.set_ylabel("throughput (inferences/s)")
    axes.set_title(f"modelship tune {result.request.model}")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def _mark(axes: Axes, point: Point | None, label: str, color: str, marker: str) -> None:
    if point is not None:
        axes.scatter([point.p99_ms], [point.throughput], s=160, color=color, marker=marker, label=label, zorder=3)
