"""The cost-growth figure: export, parity and serving cost against model size and batch size (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

from modelship.bench.report import Row

MODEL_SERIES = (("export_s", "export (s)"), ("parity_s", "parity (s)"))
LATENCY_SERIES = (("served_ms", "served p50 (ms)"), ("inprocess_ms", "in-process p50 (ms)"))


def plot_cost_growth(rows: list[Row], path: Path) -> Path | None:
    """Draw the `growth` suite's rows (data["axis"] is "model" or "batch") to `path`; None when there are none."""
    by_model = sorted((r for r in rows if r.data.get("axis") == "model"), key=lambda r: r.data["params_m"])
    by_batch = sorted((r for r in rows if r.data.get("axis") == "batch"), key=lambda r: r.data["batch"])
    if not by_model and not by_batch:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _series(axes[0], by_model, "params_m", MODEL_SERIES, "parameters (millions)", "seconds", "Export and parity")
    _series(axes[1], by_model, "params_m", LATENCY_SERIES, "parameters (millions)", "ms", "Latency, batch 1")
    _series(axes[2], by_batch, "batch", LATENCY_SERIES, "batch size", "ms", "Latency vs batch")
    for row in by_model:
        axes[1].annotate(row.data["model"], (row.data["params_m"], row.data.get("served_ms") or 0), fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _series(axis, rows: list[Row], x_key: str, series, xlabel: str, ylabel: str, title: str) -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    axis.set_title(title)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.grid(True, alpha=0.3)
    if not rows:
        axis.text(0.5, 0.5, "not measured", ha="center", va="center", transform=axis.transAxes)
        return
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.xaxis.set_major_formatter(ScalarFormatter())  # plain numbers, not 6x10^0
    axis.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap on short log axes
    for key, label in series:
        points = [(r.data[x_key], r.data[key]) for r in rows if r.data.get(key)]
        if points:
            xs, ys = zip(*points, strict=True)
            axis.plot(xs, ys, marker="o", label=label)
    axis.legend(fontsize=8)
