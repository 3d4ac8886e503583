"""`export-model CKPT` (= `modelship export`): export TorchScript/ONNX fp32 and the variants asked for (fp16, INT8),
each verified against eager. The format and precision flags are generated from the registries (cli.variant_flags)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from modelship.cli.export_view import (
    ProgressListener,
    kept_fp32_lines,
    rows_from_manifest,
    rows_from_parity,
    summary_table,
)
from modelship.cli.flags import flag_group
from modelship.cli.load_view import fingerprint_progress, print_load_report
from modelship.cli.loader_options import load_flags
from modelship.cli.main import emit_json, json_option, make_console, parse_batch_sizes
from modelship.cli.numbers import count
from modelship.cli.tolerance_flags import tolerance_flags
from modelship.cli.variant_flags import VariantFlagsCommand, chosen
from modelship.contract.errors import ModelshipError, ParityError, PublishError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.opsets import OnnxExporter

if TYPE_CHECKING:  # torch is imported only when a command runs
    from modelship.checkpoint import LoadOptions
    from modelship.export.precision.registry import VariantOptions
    from modelship.export.spec import ExportSpec, FormatChoice
    from modelship.parity import ToleranceOverrides

DEFAULT_OUT = Path("exports")
# A whole opset number, refused while parsing when NaN, infinite, below 1 or huge; which opsets the target Triton
# loads (and the exporter writes) is judged with the model's kind known (contract.opsets.resolve_opset, its hint)
OPSET = count(999)


@dataclass(frozen=True)
class ExportFlags:
    """export-model's own flags; `spec` turns them into the pipeline's ExportSpec. `formats`, `precisions` and
    `options`: the generated format and precision flags given and each precision's options (cli.variant_flags)."""

    formats: tuple[str, ...]
    precisions: tuple[str, ...]
    options: tuple[VariantOptions, ...]
    require_variants: bool
    preprocess: str | None
    out: Path
    name: str | None
    opset: int | None
    exporter: str | None
    trace: bool
    inputs: tuple[str, ...]
    dynamic: str
    batch_sizes: tuple[int, ...]
    force: bool
    task: str | None

    def format_choice(self, arch: str | None = None) -> FormatChoice:
        """The default formats' flags given (--torchscript / --onnx), else what the model kind exports
        (export.spec.default_formats: both, ONNX alone for a Hugging Face folder), plus the other formats' flags
        (--pt2). `arch`: the loaded model's, None before it is loaded."""
        from modelship.export.formats import default_formats as registered_defaults
        from modelship.export.spec import FormatChoice, default_formats

        primary = set(registered_defaults())
        given = tuple(f for f in self.formats if f in primary)
        choice = FormatChoice(given) if given else default_formats(arch, self.trace)
        return replace(choice, formats=(*choice.formats, *(f for f in self.formats if f not in primary)))

    def spec(self, checkpoint: Path, tolerances: ToleranceOverrides) -> ExportSpec:
        """The ExportSpec (its formats before the model's kind is known: `format_choice(arch)` once it is); the export
        is named after the checkpoint's file stem unless --name says otherwise."""
        from modelship.contract.names import check_name
        from modelship.export.io_resolve import parse_axes
        from modelship.export.spec import ExportSpec

        if self.name is None:
            name = check_name(Path(checkpoint).stem, "export name (the checkpoint's file stem)", UsageError)
        else:
            name = check_name(self.name, "--name", UsageError)
        return ExportSpec(
            out_dir=Path(self.out) / name,
            formats=self.format_choice().formats,
            precisions=self.precisions,
            options=self.options,
            require_variants=self.require_variants,
            opset=self.opset,
            exporter=None if self.exporter is None else OnnxExporter(self.exporter),  # a --exporter choice
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
        click.option(
            "--require-variants",
            is_flag=True,
            help="Fail (exit 1, nothing written) when a variant asked for is declined: INT8 not accurate enough "
            "after every try, or slower than fp32. Default: the verified artifacts are written and the decline "
            "says why in one line (for CI that needs the variant).",
        ),
        click.option(
            "--preprocess",
            metavar="SPEC",
            help="The model's image preprocessing, when neither the checkpoint nor its architecture knows it (a "
            "factory's model): a JSON file, or key=value pairs such as resize=256,crop=224,mean=0.485/0.456/0.406"
            ",std=0.229/0.224/0.225 (ImageNet's values are the defaults; docs/preprocess.md). It sizes the input, "
            "calibrates --int8, feeds parity's --images and the published _pipeline. Wins over the checkpoint's "
            "metadata and <ckpt>.json sidecar.",
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
            "--opset",
            type=OPSET,
            default=None,
            help="ONNX opset. Default: the highest the target Triton loads (21).",
        ),
        click.option(
            "--exporter",
            type=click.Choice([e.value for e in OnnxExporter]),
            default=None,
            help="ONNX exporter: torch.export based (dynamo) or TorchScript-based (legacy). Default: dynamo, or "
            "what the model kind needs (legacy for detectors, which torch.export cannot export).",
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
    lambda **values: ExportFlags(**values, **vars(chosen())),
)


@click.command("export", cls=VariantFlagsCommand)
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
    """Export CKPT to TorchScript and/or ONNX (fp32, and fp16 or INT8 variants when asked) and prove each artifact
    matches eager PyTorch: on seeded inputs at two batch sizes, and INT8 on real inputs held back from --calibrate,
    judged by what the task answers (classes, masks, boxes, embeddings). CKPT is a checkpoint file, or a Hugging
    Face folder (save_pretrained or sentence-transformers; its tokenizer.json is exported with it, and with no
    format flag ONNX alone: transformers models do not script).

    \b
    Writes OUT/NAME/: model.pt, model.fp16.pt, model.onnx, model.fp16.onnx, model.int8.onnx, manifest.json
    (provenance, I/O, parity figures, timings), golden.npz (inputs + eager outputs; golden.int8.npz for INT8) and
    checkpoint.json. Nothing is written unless every artifact passes; an INT8 variant that is not accurate enough
    after every try, or measured slower than fp32 here (unless --keep-slower), is declined in one line with its
    figures and the verified artifacts are written (--require-variants fails instead).

    \b
    Examples:
      export-model ckpt.pt --onnx --fp16
      export-model ckpt.pt --onnx --int8 --calibrate photos/
      export-model ckpt.pt --onnx --int8 --calibrate photos/ --holdout judge-photos/
      export-model lite0.pth --arch lite_factory:Lite0 --onnx --int8 --calibrate photos/ \\
          --preprocess resize=256,crop=224
      export-model ckpt.pt --arch resnet50 --torchscript --trace
      export-model ./my-classifier --onnx --fp16
      export-model enc.pt --onnx --input input_ids:batch,sequence:int64:0..1000 \\
          --input attention_mask:batch,sequence:int64:0..2
    """
    from modelship.checkpoint import LoadReport, load_model
    from modelship.contract.preprocessing import PreprocessSpec
    from modelship.export.loaded import export_loaded
    from modelship.export.run import refuse_existing
    from modelship.export.steps import Steps

    console = make_console(stderr=True, soft_wrap=True)  # a progress line stays one line in a log
    spec = flags.spec(load.checkpoint, tolerances)
    preprocess = PreprocessSpec.from_option(flags.preprocess) if flags.preprocess is not None else None
    refuse_existing(spec.out_dir, spec.force)  # before the (possibly slow) load
    steps = Steps(ProgressListener(console))
    try:
        with steps("load checkpoint"):
            loaded = load_model(load, progress=None if as_json else fingerprint_progress())
    except ModelshipError as exc:
        if not as_json and exc.details.get("sha256"):
            print_load_report(console, LoadReport.from_dict(exc.details))
        raise
    if not as_json:
        print_load_report(console, loaded.report)
    choice = flags.format_choice(loaded.arch)
    if not as_json:
        for skipped in choice.skipped:
            console.print(skipped.line(), highlight=False)
    try:
        result = export_loaded(loaded, replace(spec, formats=choice.formats), preprocess=preprocess, steps=steps)
    except ParityError as exc:
        if not as_json:
            console.print(summary_table(rows_from_parity(exc.details.get("artifacts", {}))))
        raise
    payload = {"ok": True, **result.manifest.to_dict(), "folder": str(result.folder)}
    payload["skipped"] = [skipped.to_dict() for skipped in choice.skipped]
    if publish is not None:
        payload["published"] = _publish(result.folder, publish or None, console)
    if as_json:
        emit_json(payload)
        return
    make_console().print(summary_table(rows_from_manifest(result.manifest)))
    for line in kept_fp32_lines(result.manifest):
        click.echo(line)
    for art in result.manifest.artifacts:
        assert art.details is not None  # an Artifact made without details gets its format's defaults
        for line in art.details.lines():
            click.echo(f"{art.name}: {line}")
    for declined in result.manifest.declined:
        click.echo(declined.reason)
        for line in declined.details.warnings() if declined.details is not None else []:
            click.echo(f"{declined.name}: {line}")
    click.echo(f"exported {spec.name} to {result.folder}")


def _publish(folder: Path, repo: str | None, console: Console) -> JsonObject:
    """Publish the verified export (serve.publish's default repository unless REPO, a folder or s3://, is given)."""
    try:
        from modelship.serve.publish import DEFAULT_REPO, PublishOptions
        from modelship.serve.s3_publish import publish_to
    except ImportError as exc:
        raise PublishError(
            f"publishing is not available: {exc}", hint="publish later with `modelship publish`"
        ) from None
    with console.status(f"publish {folder.name}"):
        result = publish_to(repo or DEFAULT_REPO, folder, PublishOptions())
    console.print(f"[green]✓[/] published {', '.join(result.names)} to {result.repo}")
    return result.to_dict()
