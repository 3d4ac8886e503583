"""How `export-model` shows an export: a spinner over the running steps with one line per finished step, the
summary table of every artifact's parity, and the lines naming what fp16 variants kept in fp32."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from modelship.contract.json_object import JsonObject

if TYPE_CHECKING:
    from modelship.contract.artifact_details import ArtifactDetails
    from modelship.contract.manifest import Artifact, Manifest
    from modelship.contract.parity_report import ParityReport

Row = tuple[str, "int | None", "ParityReport | None"]  # artifact, size in bytes, its parity


class ProgressListener:
    """One spinner naming the steps running (TorchScript verifies on a second thread beside the other exports) and
    one line with its time when each ends, on stderr. Called from both threads."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._running: list[str] = []
        self._status: Status | None = None
        self._lock = threading.Lock()

    def started(self, step: str) -> None:
        with self._lock:
            self._running.append(step)
            self._show()

    def finished(self, step: str, seconds: float, ok: bool) -> None:
        with self._lock:
            self._running.remove(step)
            self._show()
            mark = "[green]✓[/]" if ok else "[red]✗[/]"
            self.console.print(f"{mark} {step} [dim]{seconds:.2f} s[/]")

    def progress(self, step: str, message: str) -> None:
        with self._lock:
            self.console.print(f"  {escape(step)}: {escape(message)}", style="dim")

    def _show(self) -> None:
        if not self._running:
            if self._status is not None:
                self._status.stop()
                self._status = None
        elif self._status is None:
            self._status = self.console.status(" · ".join(self._running))
            self._status.start()
        else:
            self._status.update(" · ".join(self._running))


def kept_fp32_lines(manifest: Manifest) -> list[str]:
    """One line per fp16 artifact that keeps parts in fp32: which modules (and ONNX nodes), and why."""
    lines = []
    for art in manifest.artifacts:
        details = _details(art)
        modules = details.kept_in_fp32()
        if modules:
            shown = "; ".join(f"{m} ({', '.join(dict.fromkeys(ops))})" if ops else m for m, ops in modules.items())
            reason = details.kept_reason()
            why = f" - e.g. {reason}" if reason else ""
            lines.append(f"{art.name}: kept in fp32 to stay within float16's range: {shown}{why}")
        if details.fp16_keep:
            flags = " ".join(f"--fp16-keep {m}" for m in details.fp16_keep)
            lines.append(f"{art.name}: reproduce with {flags}")
    return lines


def _details(art: Artifact) -> ArtifactDetails:
    assert art.details is not None  # an Artifact made without details gets its format's defaults
    return art.details


def rows_from_manifest(manifest: Manifest) -> list[Row]:
    return [(a.name, _details(a).bytes or None, a.parity) for a in manifest.artifacts]


def rows_from_parity(reports: dict[str, JsonObject]) -> list[Row]:
    from modelship.contract.parity_report import ParityReport

    return [(name, None, ParityReport.from_dict(parity)) for name, parity in reports.items()]


def summary_table(rows: list[Row]) -> Table:
    """artifact, size, worst max abs error, worst cosine, worst top-1 agreement (of the outputs compared as tensors),
    and the verdict of every output, however it was compared."""
    from modelship.contract.parity_report import OutputMetrics

    table = Table(title="Export summary", title_justify="left")
    for column in ("artifact", "size", "max abs err", "cosine", "top-1", "verdict"):
        table.add_column(column, justify="left" if column in ("artifact", "verdict") else "right")
    for name, size, report in rows:
        results = report.outputs if report is not None else []
        outputs = [o for o in results if isinstance(o, OutputMetrics)]
        judged = escape("; ".join(o.summary() for o in results if not isinstance(o, OutputMetrics)))  # masks, boxes
        max_abs = max((o.max_abs for o in outputs), default=None)
        cosine = min((o.cosine for o in outputs), default=None)
        top1 = min((o.top1_agreement for o in outputs if o.top1_agreement is not None), default=None)
        passed = report is not None and report.passed
        error = (report.error if report is not None else None) or ""
        verdict = ("[green]PASS[/]" if passed else f"[red]FAIL[/] {error}".rstrip()) + (f" {judged}" if judged else "")
        table.add_row(
            name,
            "-" if size is None else f"{size / 1e6:.1f} MB",
            "-" if max_abs is None else f"{max_abs:.2e}",
            "-" if cosine is None else f"{cosine:.6f}",
            "-" if top1 is None else f"{top1:.3f}",
            verdict,
        )
    return table
