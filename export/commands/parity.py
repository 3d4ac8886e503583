"""`modelship parity EXPORT_DIR`: re-check an export's artifacts against eager PyTorch or its golden data.

Reads manifest.json, builds the reference (the checkpoint rebuilt in eager PyTorch, or the saved golden outputs),
runs every artifact (and optionally a served Triton model) on the same inputs (seeded random batches or the golden
inputs), writes parity.json and exits non-zero on failure. With --images the comparison is end to end: the image
files go through the training preprocessing (torch) into eager PyTorch, and through the serving preprocessing
(preprocess/ with the manifest's spec) into each artifact, so a wrong preprocessing spec fails too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from export.cli import GuardedCommand, emit_json, json_option, make_console, parse_batch_sizes
from export.errors import ParityError, UsageError
from export.manifest import MANIFEST_NAME, Artifact, Manifest
from export.parity.pipelines import IMAGES

REPORT_NAME = "parity.json"


@click.command("parity", cls=GuardedCommand)
@click.argument("export_dir", type=click.Path(path_type=Path, file_okay=False), metavar="EXPORT_DIR")
@click.option(
    "--against",
    type=click.Choice(["checkpoint", "golden"]),
    default="checkpoint",
    show_default=True,
    help="Reference: the checkpoint rebuilt in eager PyTorch, or the golden outputs saved at export (no checkpoint "
    "or model code needed).",
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Checkpoint to rebuild, if it moved since export (its sha256 must match the manifest's).",
)
@click.option(
    "--arch",
    metavar="NAME",
    help="Architecture to rebuild the checkpoint with. Needed when the manifest names an import path "
    "(package.module:Factory): a file may name only registry architectures, code to import comes from the command "
    "line. Default: the manifest's.",
)
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    metavar="NAME",
    help="Check only this artifact (onnx, onnx_fp16, torchscript, torchscript_fp16). Repeatable. Default: all.",
)
@click.option(
    "--batch-sizes",
    default="1,8",
    show_default=True,
    callback=parse_batch_sizes,
    help="Batch sizes of the seeded random inputs (with --against checkpoint).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option(
    "--images",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Also compare end to end on the image files in DIR: eager PyTorch gets them through the model's training "
    "transforms (timm/torchvision config, or the checkpoint's preprocess metadata), each artifact through the "
    "manifest's preprocessing spec. Two sets: the first image alone, then all of them.",
)
@click.option(
    "--preprocess",
    "preprocess_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Serving preprocessing spec (JSON) for --images, instead of the manifest's (to test a candidate spec).",
)
@click.option(
    "--atol", type=float, default=None, help="Absolute tolerance for every artifact (default: fp32 1e-3, fp16 1e-1)."
)
@click.option(
    "--rtol", type=float, default=None, help="Relative tolerance for every artifact (default: fp32 1e-3, fp16 5e-2)."
)
@click.option(
    "--tolerances",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="JSON tolerances: fields atol, rtol, min_cosine, min_top1 and per_output {name: {...}}, "
    'optionally keyed by precision: {"fp16": {"atol": 0.1}}. --atol/--rtol apply on top.',
)
@click.option(
    "--served",
    metavar="URL",
    help="Also compare the model served by Triton at URL (host:port, http://... or grpc://...).",
)
@click.option(
    "--protocol",
    type=click.Choice(["http", "grpc"]),
    default="http",
    show_default=True,
    help="Protocol for --served when URL has no scheme.",
)
@click.option(
    "--served-model",
    metavar="NAME",
    help="Triton model name for --served. Default: as published, NAME_ARTIFACT for one --artifact, else NAME_onnx.",
)
@click.option(
    "--served-precision",
    type=click.Choice(["fp32", "fp16"]),
    default="fp32",
    show_default=True,
    help="Tolerances to judge the served model by.",
)
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
def parity_command(**kwargs: Any) -> None:
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
    """
    as_json = kwargs.pop("as_json")
    if kwargs["images"] and kwargs["against"] == "golden":
        raise UsageError("--images needs --against checkpoint", hint="golden data holds outputs for its own inputs")
    if kwargs["explain"] and kwargs["against"] == "golden":
        raise UsageError("--explain needs --against checkpoint", hint="it compares every module with eager PyTorch")
    folder: Path = kwargs["export_dir"]
    manifest = Manifest.read(folder)
    artifacts = _select(manifest, kwargs["artifacts"])
    overrides = _overrides(kwargs)
    console = make_console(stderr=True)
    serving = _serving_spec(manifest, kwargs) if kwargs["images"] else None
    with console.status("checking artifact files against the manifest"):
        changed = {a.name: reason for a in artifacts if (reason := _changed_since_export(folder, a))}
    with console.status("preparing reference"):
        reference, sets, labels, images, model = _reference(manifest, folder, kwargs, serving)
    reports = []
    for artifact in artifacts:
        if artifact.name in changed:
            reports.append(_unchecked(reference, artifact.name, changed[artifact.name]))
            continue
        with _runner(folder, artifact, kwargs) as runner, console.status(f"checking {runner.name}"):
            candidate = _serving(runner, serving, artifact.io)
            reports.append(_compare(reference, candidate, sets, labels, artifact.precision, overrides))
    if kwargs["served"]:
        runner = _serving(_served_runner(manifest, kwargs), serving, manifest.io)
        with console.status(f"checking {runner.name}"):
            reports.append(_compare(reference, runner, sets, labels, kwargs["served_precision"], overrides))
    passed = all(r.passed for r in reports)
    payload = {
        "ok": passed,
        "export": manifest.name,
        "against": kwargs["against"],
        "inputs": labels,
        "passed": passed,
        "reports": [r.to_dict() for r in reports],
    }
    image_labels = {label for label, inputs in zip(labels, sets, strict=True) if IMAGES in inputs}
    diagnoses = {r.candidate: d for r in reports if (d := _preprocessing_diagnosis(r, image_labels, images))}
    if images:
        payload["image_pipelines"] = images
    if diagnoses:
        payload["diagnosis"] = diagnoses
    explained = {}
    if kwargs["explain"] and not passed:
        with console.status("localising the failures"):
            explained = _explain(folder, manifest, [r for r in reports if not r.passed], changed, model, sets)
        payload["explain"] = {name: e.to_dict() for name, e in explained.items()}
    report_path = kwargs["report_path"] or folder / REPORT_NAME
    report_path.write_text(json.dumps(payload, indent=2) + "\n")
    payload["report"] = str(report_path)
    if not as_json:
        from export.parity import render_table

        make_console().print(render_table(reports))
        for report in reports:
            click.echo(report.summary_line())
            for reason in report.failures():
                click.echo(f"  - {reason}")
            if report.candidate in diagnoses:
                click.echo(f"  => {diagnoses[report.candidate]}")
            for line in explained[report.candidate].lines() if report.candidate in explained else []:
                click.echo(f"  => {line}")
    if not passed:
        failed = [r for r in reports if not r.passed]
        why = next(iter(diagnoses.values()), None) or next(r.failures() or [r.error] for r in failed)[0]
        raise ParityError(
            f"{len(failed)} of {len(reports)} failed parity against {reference.name}: "
            f"{', '.join(r.candidate for r in failed)} - {why}",
            hint=f"details in {report_path}",
            details={k: v for k, v in payload.items() if k != "ok"},
        )
    if as_json:
        emit_json(payload)
    else:
        click.echo(f"all {len(reports)} passed parity against {reference.name}; report: {report_path}")


def _explain(
    folder: Path, manifest: Manifest, failed: list[Any], changed: dict[str, str], model: Any, sets: list[Any]
) -> dict[str, Any]:
    """export.explain for each failing artifact (not the served model, not files changed since export), on the
    first random input set it failed (image sets go through preprocessing: the random ones localise the model)."""
    from export.explain import explain_artifact

    names = {a.name: a for a in manifest.artifacts}
    explained = {}
    for report in failed:
        artifact = names.get(report.candidate)
        if artifact is None or artifact.name in changed:
            continue
        index = report.first_failed_set(lambda i: IMAGES not in sets[i])
        explained[artifact.name] = explain_artifact(folder, artifact, model, manifest.io, sets[index])
    return explained


def _select(manifest: Manifest, names: tuple[str, ...]) -> list[Artifact]:
    if not names:
        if not manifest.artifacts:
            raise UsageError(f"export {manifest.name!r} lists no artifacts")
        return list(manifest.artifacts)
    return [manifest.artifact(name) for name in names]


def _overrides(kwargs: dict[str, Any]) -> dict[str, Any]:
    from export.parity.tolerance import PRECISIONS, read_overrides

    overrides = read_overrides(kwargs["tolerances"]) if kwargs["tolerances"] else {}
    flags = {name: kwargs[name] for name in ("atol", "rtol") if kwargs[name] is not None}
    if not flags:
        return overrides
    if set(overrides) & set(PRECISIONS):
        return {p: {**(overrides.get(p) or {}), **flags} for p in PRECISIONS}
    return {**overrides, **flags}


def _reference(
    manifest: Manifest, folder: Path, kwargs: dict[str, Any], serving: tuple[Any, str] | None
) -> tuple[Any, list[Any], list[str], dict[str, Any], Any]:
    """The reference runner (outputs computed once and replayed), the input sets, their labels, with --images
    both image pipelines and how far apart their model inputs are, and the eager model (None against golden)."""
    from export.parity import GoldenRunner, TorchRunner, input_sets, load_golden

    if kwargs["against"] == "golden":
        if not manifest.golden:
            raise ParityError(f"export {manifest.name!r} has no golden data", hint="use --against checkpoint")
        inputs, outputs = load_golden(folder / manifest.golden)
        labels = [f"golden set {i}" for i in range(len(inputs))]
        return GoldenRunner(inputs, outputs, name="golden"), inputs, labels, {}, None
    loaded, checkpoint = _rebuild(manifest, folder, kwargs["checkpoint"], kwargs["arch"])
    eager: Any = TorchRunner(loaded.model, manifest.io, name="eager")
    sets = input_sets(manifest.io, kwargs["batch_sizes"], seed=kwargs["seed"])
    labels = [f"batch {b}" for b in kwargs["batch_sizes"]]
    images: dict[str, Any] = {}
    if serving is not None:
        from export.parity import pipelines
        from preprocess import image_files

        image = pipelines.image_input(manifest.io)
        files = image_files(kwargs["images"])
        transform = pipelines.training_transform(loaded.model, loaded.arch, loaded.metadata, str(checkpoint))
        eager = pipelines.training_pipeline(eager, transform, image.name)
        difference = pipelines.preprocessing_difference(
            eager.preprocess, pipelines.serving_preprocess(serving[0], image.dtype), files
        )
        images = {"reference": transform.source, "candidates": f"preprocess/ with {serving[1]}", **difference}
        sets.append(pipelines.image_set(files[:1]))
        labels.append(f"image {files[0].name}")
        if len(files) > 1:  # images at a second batch size
            sets.append(pipelines.image_set(files))
            labels.append(f"{len(files)} images from {kwargs['images']}")
    # eager outputs computed once, replayed for every candidate
    return GoldenRunner(sets, [eager.run(s) for s in sets], name="eager"), sets, labels, images, loaded.model


def _rebuild(manifest: Manifest, folder: Path, checkpoint: Path | None, arch: str | None) -> tuple[Any, Path]:
    """The LoadedModel rebuilt from the manifest's source (its sha256 checked before anything is read from it),
    and the checkpoint path it came from. The manifest is a data file: its arch may only name a registry model."""
    from export.checkpoint import LoadOptions, load_model
    from export.checkpoint.arch import check_data_arch

    source = manifest.source
    if arch is None:
        check_data_arch(source.arch, source.arch_kwargs, file=str(folder / MANIFEST_NAME), field="source.arch")
    path = checkpoint or _checkpoint_path(source.checkpoint, folder)
    options = LoadOptions(
        checkpoint=path,
        arch=arch or source.arch,
        arch_kwargs=dict(source.arch_kwargs or {}),
        expected_sha256=source.sha256 or None,
    )
    return load_model(options), path


def _checkpoint_path(recorded: str, folder: Path) -> Path:
    """The recorded path as given at export time (relative to the current folder), else relative to the export."""
    path = Path(recorded)
    for candidate in (path, folder / path):
        if candidate.is_file():
            return candidate
    raise ParityError(
        f"checkpoint {recorded} recorded in {folder / 'manifest.json'} not found",
        hint="pass it with --checkpoint, or use --against golden",
    )


def _serving_spec(manifest: Manifest, kwargs: dict[str, Any]) -> tuple[Any, str]:
    """The serving side's preprocessing for --images (--preprocess FILE, else the manifest's) and its origin."""
    from preprocess import PreprocessSpec

    if kwargs["preprocess_file"] is not None:
        return PreprocessSpec.read(kwargs["preprocess_file"]), str(kwargs["preprocess_file"])
    if not manifest.preprocess:
        raise UsageError(
            f"export {manifest.name!r} has no preprocessing spec in its manifest.json (the serving side of --images)",
            hint="export from a checkpoint whose metadata holds 'preprocess', or pass --preprocess FILE",
        )
    return PreprocessSpec.from_dict(manifest.preprocess), "manifest.json preprocess"


def _serving(runner: Any, serving: tuple[Any, str] | None, io: Any) -> Any:
    """`runner` behind the serving preprocessing when --images is given, else `runner` itself."""
    if serving is None:
        return runner
    from export.parity.pipelines import image_input, serving_pipeline

    return serving_pipeline(runner, serving[0], image_input(io), source=serving[1])


def _changed_since_export(folder: Path, artifact: Artifact) -> str | None:
    """Why the artifact's file is not the one the export verified (missing, or its sha256 differs), or None."""
    from export.manifest import sha256_file

    path = folder / artifact.file
    if not path.is_file():
        return f"{path.name} is missing (artifact {artifact.name!r} listed in the manifest; re-export)"
    actual = sha256_file(path)
    if not artifact.sha256 or actual == artifact.sha256:
        return None
    return (
        f"{path.name} changed since export: sha256 {actual[:12]}, manifest {artifact.sha256[:12]} "
        "(re-export, or restore the verified file)"
    )


def _preprocessing_diagnosis(report: Any, image_labels: set[str], images: dict[str, Any]) -> str | None:
    """Why a candidate failed on images, when the preprocessing is the cause: the two pipelines' model inputs
    differ, and (if the candidate ran) its random input sets passed."""
    if report.passed or not images or images["matches"]:
        return None
    rows = report.per_batch or []
    randoms = [row for row in rows if row["label"] not in image_labels]
    if not report.error and not all(row["passed"] for row in randoms):
        return None
    if images["max_abs"] is None:
        found = f"shape {images['serving_shape']}, the training transforms give {images['training_shape']}"
    else:
        found = f"model inputs differ by up to {images['max_abs']:.3g} (mean {images['mean_abs']:.3g})"
    return (
        f"the serving preprocessing ({images['candidates']}) does not reproduce the training transforms "
        f"({images['reference']}): {found}; check mean/std, channel order, resize/crop, interpolation"
    )


def _unchecked(reference: Any, name: str, reason: str) -> Any:
    from export.parity import ParityReport

    return ParityReport(reference.name, name, [], [], passed=False, seconds=0.0, error=reason)


@contextlib.contextmanager
def _runner(folder: Path, artifact: Artifact, kwargs: dict[str, Any]) -> Iterator[Any]:
    """The runner of one (sha256-verified) artifact, closed afterwards."""
    from export.parity import OnnxRuntimeRunner, TorchRunner

    path = folder / artifact.file
    if artifact.format in ("pt2", "aoti"):
        from export.pt2_export import load_aoti, load_program

        yield TorchRunner((load_program if artifact.format == "pt2" else load_aoti)(path), artifact.io, artifact.name)
        return
    if artifact.format != "onnx":
        yield TorchRunner(_load_torchscript(path), artifact.io, name=artifact.name)
        return
    runner = OnnxRuntimeRunner(path, artifact.io, name=artifact.name, isolated=kwargs["isolate"])
    try:
        yield runner
    finally:
        runner.close()


def _load_torchscript(path: Path) -> Any:
    from export.torchscript import load_torchscript

    try:
        return load_torchscript(path)
    except RuntimeError as exc:
        raise ParityError(f"{path}: TorchScript file cannot be loaded ({str(exc).splitlines()[0]})") from None


def _served_runner(manifest: Manifest, kwargs: dict[str, Any]) -> Any:
    try:
        from serve.publish import served_name
        from serve.runners import TritonRunner
    except ImportError as exc:
        raise UsageError(f"--served is not available: {exc}") from None
    artifact = kwargs["artifacts"][0] if len(kwargs["artifacts"]) == 1 else "onnx"
    model = kwargs["served_model"] or served_name(manifest.name, artifact)
    return TritonRunner(kwargs["served"], model, kwargs["protocol"])


def _compare(reference: Any, runner: Any, sets: list[Any], labels: list[str], precision: str, overrides: dict) -> Any:
    from export.parity import ToleranceConfig, compare_runners

    return compare_runners(reference, runner, sets, ToleranceConfig.for_precision(precision, overrides), labels=labels)
