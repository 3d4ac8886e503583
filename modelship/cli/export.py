"""`export-model CKPT` (= `modelship export`): export TorchScript/ONNX, fp32 and fp16, each verified against eager."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.status import Status
from rich.table import Table

from modelship.cli.flags import flag_group
from modelship.cli.load_view import fingerprint_progress, print_load_report
from modelship.cli.loader_options import load_flags
from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console, parse_batch_sizes
from modelship.cli.tolerance_flags import tolerance_flags
from modelship.contract.artifacts import DEFAULT_FORMATS
from modelship.contract.errors import ModelshipError, ParityError, PublishError, UsageError

if TYPE_CHECKING:  # torch is imported only when a command runs
    from modelship.checkpoint import LoadOptions
    from modelship.contract.parity_report import ParityReport
    from modelship.export.spec import ExportSpec
    from modelship.parity import ToleranceOverrides

DEFAULT_OUT = Path("exports")


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


@dataclass(frozen=True)
class ExportFlags:
    """export-model's own flags; `spec` turns them into the pipeline's ExportSpec."""

    torchscript: bool
    onnx_: bool
    pt2: bool
    fp16: bool
    fp16_io: bool
    fp16_keep: tuple[str, ...]
    out: Path
    name: str | None
    opset: int | None
    exporter: str
    trace: bool
    inputs: tuple[str, ...]
    dynamic: str
    batch_sizes: tuple[int, ...]
    force: bool
    task: str | None

    @property
    def formats(self) -> tuple[str, ...]:
        """--torchscript / --onnx (neither: both), plus --pt2."""
        chosen = tuple(f for f, on in (("torchscript", self.torchscript), ("onnx", self.onnx_)) if on)
        return (*(chosen or DEFAULT_FORMATS), *(("pt2",) if self.pt2 else ()))

    def spec(self, checkpoint: Path, tolerances: ToleranceOverrides) -> ExportSpec:
        """The ExportSpec; the export is named after the checkpoint's file stem unless --name says otherwise."""
        from modelship.contract.names import check_name
        from modelship.export.io_resolve import parse_axes
        from modelship.export.spec import ExportSpec

        if self.name is None:
            name = check_name(Path(checkpoint).stem, "export name (the checkpoint's file stem)", UsageError)
        else:
            name = check_name(self.name, "--name", UsageError)
        return ExportSpec(
            out_dir=Path(self.out) / name,
            formats=self.formats,
            fp16=self.fp16,
            fp16_io=self.fp16_io,
            fp16_keep=tuple(self.fp16_keep),
            opset=self.opset,
            exporter=self.exporter,
            trace=self.trace,
            input_options=tuple(self.inputs),
            dynamic=parse_axes(self.dynamic),
            batch_sizes=self.batch_sizes,
            tolerances=tolerances.resolved(),
            force=self.force,
            task=self.task,
        )


# What to export and how, reaching the command as `flags: ExportFlags`
export_flags = flag_group(
    "flags",
    [
        click.option("--torchscript", is_flag=True, help="Export TorchScript (model.pt). Neither format flag: both."),
        click.option("--onnx", "onnx_", is_flag=True, help="Export ONNX (model.onnx). Neither format flag: both."),
        click.option(
            "--pt2",
            is_flag=True,
            help="Also export with torch.export: the ExportedProgram (model.pt2) and an AOTInductor package compiled "
            "from it (model.aoti.pt2), both verified. Publishing them needs a Triton whose PyTorch backend loads "
            "torch_aoti.",
        ),
        click.option("--fp16", is_flag=True, help="Also write an fp16 variant of each format (model.fp16.pt/.onnx)."),
        click.option(
            "--fp16-io",
            is_flag=True,
            help="fp16 variants (ONNX and TorchScript) take and return float16. Default: float32 I/O with the "
            "casts inside the model, so clients and Triton's classification extension see FP32.",
        ),
        click.option(
            "--fp16-keep",
            multiple=True,
            metavar="MODULE",
            help="Keep this module (dotted name, e.g. blocks.3.attn) in fp32 in the fp16 variants; repeatable. "
            "export-model prints these flags when it had to find such modules itself.",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=DEFAULT_OUT,
            show_default=True,
            help="Folder that holds exports; this one goes to OUT/NAME.",
        ),
        click.option(
            "--name", default=None, help="Export (and Triton model) name. Default: the checkpoint's file stem."
        ),
        click.option(
            "--opset", type=int, default=None, help="ONNX opset. Default: the highest the target Triton loads (21)."
        ),
        click.option(
            "--exporter",
            type=click.Choice(["dynamo", "legacy"]),
            default="dynamo",
            show_default=True,
            help="ONNX exporter: torch.export based (dynamo) or TorchScript-based (legacy).",
        ),
        click.option(
            "--trace",
            is_flag=True,
            help="TorchScript by torch.jit.trace instead of script (bakes in data-dependent control flow).",
        ),
        click.option(
            "--input",
            "inputs",
            multiple=True,
            metavar="SPEC",
            help="Describe one forward() input as name:dims:dtype[:low..high], e.g. "
            "input_ids:batch,sequence:int64:0..1000 (repeat per input; axis=N sets an example size).",
        ),
        click.option(
            "--dynamic", default="", metavar="AXES", help="Axes made dynamic besides batch, e.g. height,width."
        ),
        click.option(
            "--batch-sizes",
            default="1,7",
            show_default=True,
            callback=parse_batch_sizes,
            help="Batch sizes every artifact is verified at (at least two different).",
        ),
        click.option("--force", is_flag=True, help="Replace an existing export of the same name (atomically)."),
        click.option(
            "--task",
            default=None,
            metavar="TASK",
            help="What kind of model this is (classification): how each output is judged and what publishing adds. "
            "Default: the checkpoint metadata's 'task', else the task that claims the model's outputs.",
        ),
    ],
    ExportFlags,
)


@click.command("export", cls=GuardedCommand)
@load_flags
@export_flags
@tolerance_flags
@click.option(
    "--publish",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[REPO]",
    help="After a verified export, publish it to a Triton model repository (default repo: model_repo/).",
)
@json_option
def export_command(
    load: LoadOptions, flags: ExportFlags, tolerances: ToleranceOverrides, publish: str | None, as_json: bool
) -> None:
    """Export CKPT to TorchScript and/or ONNX (fp32, optionally fp16) and prove each artifact matches eager
    PyTorch on seeded inputs at two batch sizes.

    \b
    Writes OUT/NAME/: model.pt, model.fp16.pt, model.onnx, model.fp16.onnx, manifest.json (provenance, I/O,
    parity figures, timings), golden.npz (inputs + eager outputs) and checkpoint.json. Nothing is written unless
    every artifact passes.

    \b
    Examples:
      export-model ckpt.pt --onnx --fp16
      export-model ckpt.pt --arch resnet50 --torchscript --trace
      export-model enc.pt --onnx --input input_ids:batch,sequence:int64:0..1000 \\
          --input attention_mask:batch,sequence:int64:0..2
    """
    from modelship.checkpoint import load_model
    from modelship.export.run import refuse_existing, run_export
    from modelship.export.steps import Steps

    console = make_console(stderr=True)
    spec = flags.spec(load.checkpoint, tolerances)
    refuse_existing(spec.out_dir, spec.force)  # before the (possibly slow) load
    steps = Steps(ProgressListener(console))
    try:
        with steps("load checkpoint"):
            loaded = load_model(load, progress=None if as_json else fingerprint_progress())
    except ModelshipError as exc:
        if not as_json and exc.details.get("sha256"):
            print_load_report(console, exc.details)
        raise
    if not as_json:
        print_load_report(console, loaded.report.to_dict())
    try:
        result = run_export(
            loaded.model,
            spec,
            source=_source(loaded, load.checkpoint),
            metadata=loaded.metadata,
            preprocess=loaded.serving_spec(),
            sidecar=_sidecar(loaded, load.checkpoint),
            steps=steps,
        )
    except ParityError as exc:
        if not as_json:
            console.print(summary_table(_rows_from_parity(exc.details.get("artifacts", {}))))
        raise
    payload = {"ok": True, **result.manifest.to_dict(), "folder": str(result.folder)}
    if publish is not None:
        payload["published"] = _publish(result.folder, publish or None, console)
    if as_json:
        emit_json(payload)
        return
    make_console().print(summary_table(_rows_from_manifest(result.manifest)))
    for line in kept_fp32_lines(result.manifest):
        click.echo(line)
    click.echo(f"exported {spec.name} to {result.folder}")


def _source(loaded: Any, checkpoint: Path) -> Any:
    from modelship.contract.manifest import Source

    return Source(
        checkpoint=str(checkpoint),
        sha256=loaded.checkpoint_sha256,
        arch=loaded.arch,
        arch_kwargs=dict(loaded.arch_kwargs or {}),
        arch_source=loaded.arch_source,
    )


def _sidecar(loaded: Any, checkpoint: Path) -> dict[str, Any]:
    return {
        "checkpoint": str(checkpoint),
        "sha256": loaded.checkpoint_sha256,
        "arch": loaded.arch,
        "arch_kwargs": loaded.arch_kwargs,
        "arch_source": loaded.arch_source,
        "metadata": loaded.metadata,
        "load_report": loaded.report.to_dict(),
    }


def _publish(folder: Path, repo: str | None, console: Console) -> dict[str, Any]:
    """Publish the verified export (serve.publish's default repository unless REPO, a folder or s3://, is given)."""
    try:
        from modelship.serve.publish import DEFAULT_REPO, PublishOptions, publish_to
    except ImportError as exc:
        raise PublishError(
            f"publishing is not available: {exc}", hint="publish later with `modelship publish`"
        ) from None
    with console.status(f"publish {folder.name}"):
        result = publish_to(repo or DEFAULT_REPO, folder, PublishOptions())
    console.print(f"[green]✓[/] published {', '.join(result.names)} to {result.repo}")
    return result.to_dict()


def kept_fp32_lines(manifest: Any) -> list[str]:
    """One line per fp16 artifact that keeps parts in fp32: which modules (and ONNX nodes), and why."""
    lines = []
    for art in manifest.artifacts:
        modules = art.details.kept_in_fp32()
        if modules:
            shown = "; ".join(f"{m} ({', '.join(dict.fromkeys(ops))})" if ops else m for m, ops in modules.items())
            reason = art.details.kept_reason()
            why = f" - e.g. {reason}" if reason else ""
            lines.append(f"{art.name}: kept in fp32 to stay within float16's range: {shown}{why}")
        if art.details.fp16_keep:
            flags = " ".join(f"--fp16-keep {m}" for m in art.details.fp16_keep)
            lines.append(f"{art.name}: reproduce with {flags}")
    return lines


def _rows_from_manifest(manifest: Any) -> list[tuple[str, int | None, ParityReport | None]]:
    return [(a.name, a.details.bytes or None, a.parity) for a in manifest.artifacts]


def _rows_from_parity(reports: dict[str, dict[str, Any]]) -> list[tuple[str, int | None, ParityReport | None]]:
    from modelship.contract.parity_report import ParityReport

    return [(name, None, ParityReport.from_dict(parity)) for name, parity in reports.items()]


def summary_table(rows: list[tuple[str, int | None, ParityReport | None]]) -> Table:
    """artifact, size, worst max abs error, worst cosine, worst top-1 agreement (of the outputs compared as tensors),
    and the verdict of every output, however it was compared."""
    from modelship.contract.parity_report import OutputMetrics

    table = Table(title="Export summary", title_justify="left")
    for column in ("artifact", "size", "max abs err", "cosine", "top-1", "verdict"):
        table.add_column(column, justify="left" if column in ("artifact", "verdict") else "right")
    for name, size, report in rows:
        outputs = [o for o in (report.outputs if report is not None else []) if isinstance(o, OutputMetrics)]
        max_abs = max((o.max_abs for o in outputs), default=None)
        cosine = min((o.cosine for o in outputs), default=None)
        top1 = min((o.top1_agreement for o in outputs if o.top1_agreement is not None), default=None)
        passed = report is not None and report.passed
        error = (report.error if report is not None else None) or ""
        verdict = "[green]PASS[/]" if passed else f"[red]FAIL[/] {error}".rstrip()
        table.add_row(
            name,
            "-" if size is None else f"{size / 1e6:.1f} MB",
            "-" if max_abs is None else f"{max_abs:.2e}",
            "-" if cosine is None else f"{cosine:.6f}",
            "-" if top1 is None else f"{top1:.3f}",
            verdict,
        )
    return table
