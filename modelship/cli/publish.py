"""`modelship publish EXPORT_DIR`: write one Triton model per artifact into a model repository."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from modelship.cli.flags import flag_group
from modelship.cli.main import GuardedCommand, emit_json, json_option, make_console
from modelship.cli.numbers import count, whole
from modelship.cli.server_flags import repo_option
from modelship.serve.publish import AUTO_PIPELINE, PublishOptions
from modelship.serve.s3_publish import publish_to
from modelship.serve.stock_image import missing_packages, stock_dockerfile
from modelship.serve.triton_config import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_QUEUE_DELAY_US,
    InstanceKind,
    ServingOptions,
)

# How each published model is served, reaching the command as `serving: ServingOptions`
serving_flags = flag_group(
    "serving",
    [
        click.option(
            "--kind",
            type=click.Choice([k.value for k in InstanceKind]),
            default=InstanceKind.AUTO.value,
            callback=lambda _ctx, _param, value: InstanceKind(value),
            show_default=True,
            help="Instance kind: auto writes no kind (Triton uses the GPUs it finds, else the CPU); cpu or gpu fix it.",
        ),
        click.option("--instances", type=count(1024), default=1, show_default=True, help="Model instances per device."),
        click.option("--trt-fp16", is_flag=True, help="GPU ONNX models: enable the TensorRT accelerator in FP16."),
        click.option(
            "--max-batch-size",
            type=count(2**31 - 1),
            default=DEFAULT_MAX_BATCH_SIZE,
            show_default=True,
            help="max_batch_size for models with a dynamic batch axis.",
        ),
        click.option(
            "--max-queue-delay-us",
            type=whole(0, 60_000_000),
            default=DEFAULT_QUEUE_DELAY_US,
            show_default=True,
            help="Dynamic batching: how long (µs) a request may wait for others to form a batch.",
        ),
        click.option(
            "--max-image-pixels",
            type=count(2**40),
            default=ServingOptions.max_image_pixels,
            show_default=True,
            help="Pipelines: the preprocess model refuses an image that decodes to more pixels (decompression "
            "bombs); the request fails, the others in its batch do not.",
        ),
        click.option(
            "--keep-versions",
            type=whole(0, 1_000_000),
            default=1,
            show_default=True,
            help="Serve the latest N versions (version_policy); 0 serves all. Older folders stay on disk.",
        ),
    ],
    ServingOptions,
)


@click.command("publish", cls=GuardedCommand)
@click.argument("export_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@repo_option("to publish into (a folder is created if missing)")
@click.option("--name", default=None, help="Base model name; models are NAME_<artifact>. Default: the export's name.")
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    metavar="NAME",
    help="Publish only this artifact (onnx, onnx_fp16, torchscript, torchscript_fp16); repeat. Default: all.",
)
@click.option(
    "--version",
    type=count(2**63 - 1),
    default=None,
    help="Explicit version number (must be free). Default: latest + 1.",
)
@click.option(
    "--labels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Class labels, one per line (default: the labels in the export manifest).",
)
@click.option(
    "--pipeline-artifact",
    default=AUTO_PIPELINE,
    show_default=True,
    metavar="auto|ARTIFACT|none",
    help="With an image preprocessing spec, also publish NAME_preprocess (server-side decoding and preprocessing) "
    "and the ensemble NAME_pipeline over ARTIFACT, which takes encoded images. auto: over the task's first "
    "published artifact of onnx_int8 (shipped only when measured faster and passing), onnx (a detector: "
    "torchscript first) when it can be built (else a note says why); none: neither.",
)
@serving_flags
@json_option
def publish_command(
    export_dir: Path,
    repo: str,
    name: str | None,
    artifacts: tuple[str, ...],
    version: int | None,
    labels: Path | None,
    pipeline_artifact: str,
    serving: ServingOptions,
    as_json: bool,
) -> None:
    """Publish EXPORT_DIR (written by export-model) to a Triton model repository.

    One Triton model per artifact, NAME_onnx, NAME_onnx_fp16, NAME_torchscript, NAME_torchscript_fp16, each with
    a config.pbtxt, labels.txt, preprocess.json and a new immutable version folder holding the sha256-verified
    model file and its manifest (modelship.json). Safe against concurrent and interrupted publishers.
    """
    pipeline = None if pipeline_artifact == "none" else pipeline_artifact
    options = PublishOptions(name, artifacts or None, version, labels, serving, pipeline)
    result = publish_to(repo, export_dir, options)
    if as_json:
        emit_json({"ok": True, **result.to_dict()})
        return
    table = Table(title=f"published to {result.repo}")
    for column in ("model", "version", "artifact", "sha256"):
        table.add_column(column)
    for model in result.models:
        table.add_row(model.name, str(model.version), model.artifact, model.sha256[:12])
    make_console().print(table)
    for note in result.notes:
        click.echo(f"note: {note}")
    dockerfile = stock_dockerfile(result.names)
    if dockerfile:
        needs = " and ".join(missing_packages(result.names))
        click.echo(f"stock Triton lacks {needs} for these Python-backend models; build the image with:\n{dockerfile}")
    click.echo(f"serve it: modelship serve --repo {result.repo}")
