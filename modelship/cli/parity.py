"""`modelship parity EXPORT_DIR`: re-check an export's artifacts against eager PyTorch or its golden data.

Flags become a `CheckRequest` (export.check), which `check_export` runs; this module adds the served model as one
more candidate when asked, prints the table and writes parity.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from modelship.cli.flags import PrecisionChoice, flag_group
from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console, parse_batch_sizes
from modelship.cli.numbers import whole
from modelship.cli.server_flags import protocol_option, url_option
from modelship.cli.tolerance_flags import tolerance_flags
from modelship.contract.errors import ModelshipError, ParityError, UsageError
from modelship.export.check_reference import Against, ReferenceChoice
from modelship.serve.protocols import WireProtocol

if TYPE_CHECKING:  # the check imports torch lazily; --help stays fast
    from modelship.contract.manifest import Artifact, Manifest
    from modelship.parity import ToleranceOverrides

REPORT_NAME = "parity.json"


@dataclass(frozen=True)
class ServedFlags:
    """--served and how to reach and judge the served model (`url` None: no served model)."""

    url: str | None
    protocol: WireProtocol
    model: str | None
    precision: str


reference_flags = flag_group(
    "reference",
    [
        click.option(
            "--against",
            type=click.Choice([a.value for a in Against]),
            default=Against.CHECKPOINT.value,
            show_default=True,
            help="Reference: the checkpoint rebuilt in eager PyTorch, or the golden outputs saved at export (no "
            "checkpoint or model code needed).",
        ),
        click.option(
            "--checkpoint",
            type=click.Path(path_type=Path),
            help="Checkpoint to rebuild (a file, or a Hugging Face folder), if it moved since export (its weights' "
            "sha256 must match the manifest's).",
        ),
        click.option(
            "--arch",
            metavar="NAME",
            help="Architecture to rebuild the checkpoint with. Needed when the manifest names an import path "
            "(package.module:Factory): a file may name only registry architectures, code to import comes from the "
            "command line. Default: the manifest's.",
        ),
        click.option(
            "--batch-sizes",
            default="1,8",
            show_default=True,
            callback=parse_batch_sizes,
            help="Batch sizes of the seeded random inputs (with --against checkpoint).",
        ),
        click.option(
            "--seed", type=whole(0, 2**32 - 1), default=0, show_default=True, help="Seed of the random inputs."
        ),
        click.option(
            "--images",
            type=click.Path(path_type=Path, file_okay=False),
            metavar="DIR",
            help="Also compare end to end on the image files in DIR: eager PyTorch gets them through the model's "
            "training transforms (timm/torchvision config, or the checkpoint's preprocess metadata), each artifact "
            "through the manifest's preprocessing spec. Two sets: the first image alone, then all of them.",
        ),
        click.option(
            "--texts",
            type=click.Path(path_type=Path, dir_okay=False, exists=True),
            metavar="FILE",
            help="Also compare end to end on the texts of FILE (one per line): eager PyTorch gets them through "
            "transformers' own tokenizer, each artifact through the export's tokenizer (modelship's), a served "
            "NAME_pipeline as texts. Sets: the first text alone, then the texts 8 at a time.",
        ),
        click.option(
            "--preprocess",
            metavar="SPEC",
            help="Serving preprocessing for --images, instead of the manifest's (to test a candidate spec): a JSON "
            "file, or key=value pairs such as resize=256,crop=224,mean=0.5/0.5/0.5 (docs/preprocess.md).",
        ),
    ],
    ReferenceChoice,
)
served_flags = flag_group(
    "served",
    [
        url_option("--served", "url", "Also compare the model served by Triton at URL"),
        protocol_option("--served", default=WireProtocol.HTTP),
        click.option(
            "--served-model",
            "model",
            metavar="NAME",
            help="Triton model name for --served. Default: as published, NAME_ARTIFACT for one --artifact, else "
            "NAME_onnx.",
        ),
        click.option(
            "--served-precision",
            "precision",
            type=PrecisionChoice(),
            default=None,
            help="Tolerances to judge the served model by (those of its precision: contract.precisions). Default: "
            "the precision of the artifact --artifact names, else of the export's artifact the served model is or "
            "serves (a _pipeline's model), else fp32.",
        ),
    ],
    ServedFlags,
)


@click.command("parity", cls=GuardedCommand)
@click.argument("export_dir", type=click.Path(path_type=Path, file_okay=False), metavar="EXPORT_DIR")
@reference_flags
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    metavar="NAME",
    help="Check only this artifact (onnx, onnx_fp16, onnx_int8, torchscript, torchscript_fp16). Repeatable. "
    "Default: all.",
)
@tolerance_flags
@served_flags
@click.option(
    "--isolate/--no-isolate",
    default=True,
    show_default=True,
    help="Run ONNX Runtime in a child process, so a native crash is reported instead of killing the run.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="For every failing artifact, find the first module whose output differs from eager PyTorch (and for fp16, "
    "float16 overflow/underflow): needs --against checkpoint.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="PATH",
    help=f"Where to write the JSON report. Default: EXPORT_DIR/{REPORT_NAME}.",
)
@json_option
def parity_command(
    export_dir: Path,
    reference: ReferenceChoice,
    artifacts: tuple[str, ...],
    tolerances: ToleranceOverrides,
    served: ServedFlags,
    isolate: bool,
    explain: bool,
    report_path: Path | None,
    as_json: bool,
) -> None:
    """Check that EXPORT_DIR's artifacts still match their reference, output by output.

    \b
    Prints max abs/rel error, p99, cosine and top-1 agreement per output, the tolerance that would have been
    needed, writes parity.json, and exits 1 if any artifact fails.

    \b
    Examples:
      modelship parity exports/resnet50
      modelship parity exports/resnet50 --against golden --artifact onnx_fp16
      modelship parity exports/resnet50 --images photos/ --batch-sizes 1,16 --atol 1e-3
      modelship parity exports/resnet50 --served localhost:8001 --protocol grpc
      modelship parity exports/my-classifier --texts texts.txt --served localhost:8000 \\
          --served-model my-classifier_pipeline
    """
    from modelship.contract.manifest import Manifest
    from modelship.export.check import Candidate, CheckRequest, check_export

    request = CheckRequest(export_dir, reference, artifacts, tolerances, isolate=isolate, explain=explain)
    if served.url is not None:
        manifest = Manifest.read(export_dir)
        artifact = manifest.artifact(artifacts[0]) if len(artifacts) == 1 else None
        runner = _served_runner(manifest, served, artifact.name if artifact else "onnx")
        artifact = artifact or _served_artifact(manifest, runner)
        precision = served.precision or (artifact.precision if artifact else "fp32")
        candidate = Candidate(runner, precision, artifact.name if artifact else None)
        request = replace(request, extra=(candidate,))
    console = make_console(stderr=True)
    result = check_export(request, status=console.status)
    payload = result.to_dict()
    report_path = report_path or export_dir / REPORT_NAME
    report_path.write_text(json.dumps(payload, indent=2) + "\n")
    payload["report"] = str(report_path)
    reports = result.reports
    if not as_json:
        from modelship.parity import render_table

        make_console().print(render_table(reports))
        for report in reports:
            click.echo(report.summary_line())
            for reason in report.failures():
                click.echo(f"  - {reason}")
            if report.candidate in result.diagnoses:
                click.echo(f"  => {result.diagnoses[report.candidate]}")
            for line in result.explained[report.candidate].lines() if report.candidate in result.explained else []:
                click.echo(f"  => {line}")
    if not result.passed:
        failed = [r for r in reports if not r.passed]
        why = next(iter(result.diagnoses.values()), None) or next(r.failures() or [str(r.error)] for r in failed)[0]
        raise ParityError(
            f"{len(failed)} of {len(reports)} failed parity against {result.reference}: "
            f"{', '.join(r.candidate for r in failed)} - {why}",
            hint=f"details in {report_path}",
            details={k: v for k, v in payload.items() if k != "ok"},
        )
    if as_json:
        emit_json(payload)
    else:
        click.echo(f"all {len(reports)} passed parity against {result.reference}; report: {report_path}")


def _served_artifact(manifest: Manifest, runner: Any) -> Artifact | None:
    """The export's artifact the served model is, or serves as an ensemble's step (a `_pipeline`), or None (also
    when the server cannot say: the check reports that as the served candidate's failure)."""
    from modelship.serve.publish import served_name

    try:
        names = {runner.model_name, *runner.info.steps}
    except ModelshipError:
        return None
    return next((a for a in manifest.artifacts if served_name(manifest.name, a.name) in names), None)


def _served_runner(manifest: Manifest, served: ServedFlags, artifact: str) -> Any:
    """The Triton runner of --served: `artifact` as published unless --served-model names the model."""
    assert served.url is not None
    try:
        from modelship.serve.publish import served_name
        from modelship.serve.served_runner import TritonRunner
    except ImportError as exc:
        raise UsageError(f"--served is not available: {exc}") from None
    return TritonRunner(served.url, served.model or served_name(manifest.name, artifact), served.protocol)
