"""`python -m modelship.demo`: train -> checkpoint -> export-model -> parity -> publish -> Triton -> HTTP + gRPC,
and a photo classified by curl alone through the server-side preprocessing pipeline."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import numpy as np

from modelship.cli.infer import classify
from modelship.cli.parity import REPORT_NAME
from modelship.contract.errors import ModelshipError
from modelship.contract.manifest import Manifest
from modelship.contract.parity_report import ParityReport
from modelship.demo.summary import AccuracyRow, DemoSummary, ParityVerdict, curl_answer
from modelship.demo.train import ARCH, LABELS, save_checkpoint, train, write_samples
from modelship.serve.client import TritonClient
from modelship.serve.image_pipeline import curl_example, pipeline_output
from modelship.serve.server import TritonServer, production_command

ARTIFACTS = ("onnx", "onnx_fp16", "torchscript", "torchscript_fp16")
PIPELINE = "digits_pipeline"  # encoded images in: server-side preprocessing, then digits_onnx
CLI = "import sys; from modelship.cli.main import main; main(prog_name=sys.argv.pop(1))"


def run_cli(program: str, *args: object) -> None:
    """Run `program` (modelship or export-model) as a user would, its output on this terminal."""
    words = [str(a) for a in args]
    click.secho(f"$ {program} {shlex.join(words)}", fg="cyan")
    command = [sys.executable, "-c", CLI, program, *(["export"] if program == "export-model" else []), *words]
    if subprocess.run(command, check=False).returncode != 0:
        raise ModelshipError(f"`{program} {words[0]} ...` failed", hint="see its message above")


@contextmanager
def step(title: str, timings: dict[str, float]) -> Iterator[None]:
    click.secho(f"\n== {title}", bold=True)
    began = time.perf_counter()
    yield
    timings[title] = time.perf_counter() - began
    click.secho(f"   ({timings[title]:.1f} s)", dim=True)


@click.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where exports/ and model_repo/ go.",
)
@click.option("--epochs", type=int, default=6, show_default=True, help="Training epochs.")
@click.option("--samples", type=int, default=20, show_default=True, help="Held-out digits to classify.")
def main(workdir: Path, epochs: int, samples: int) -> None:
    """Train, export, verify, publish, serve and query a digits classifier, end to end; the results go to
    exports/demo-summary.json, and any wrong answer ends the demo with exit 1."""
    summary = DemoSummary(samples=samples)
    try:
        run(workdir, epochs, summary)
    except ModelshipError as exc:
        summary.error = str(exc)
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(exc.exit_code)
    finally:
        click.echo(f"results: {summary.write(workdir / 'exports')}")


def run(workdir: Path, epochs: int, summary: DemoSummary) -> dict[str, float]:
    timings: dict[str, float] = {}
    training = workdir / "exports" / "digits-training"
    export_dir, repo = workdir / "exports" / "digits", workdir / "model_repo"
    checkpoint = training / "digits.pt"

    with step("1. train DigitsNet on scikit-learn's 8x8 digits (upsampled to 3x32x32)", timings):
        trained = train(epochs=epochs)
        save_checkpoint(trained, checkpoint)
        samples = write_samples(trained, training / "samples", summary.samples)
        summary.training_accuracy = trained.accuracy
        click.echo(f"held-out accuracy {trained.accuracy:.1%} after {epochs} epochs; checkpoint {checkpoint}")
        click.echo(f"{len(samples)} held-out digits written to {training / 'samples'}")

    with step("2. export TorchScript + ONNX, fp32 + fp16, each verified against eager PyTorch", timings):
        run_cli(
            "export-model",
            checkpoint,
            "--arch",
            ARCH,
            "--torchscript",
            "--onnx",
            "--fp16",
            "--out",
            export_dir.parent,
            "--force",
        )
        parity(summary, export_dir, "--arch", ARCH, "--images", training / "samples")

    with step("3. publish to the Triton model repository", timings):
        run_cli("modelship", "publish", export_dir, "--repo", repo)

    models = [f"digits_{a}" for a in ARTIFACTS]
    with step("4. start Triton (2.51) on loopback", timings):
        server = TritonServer(repo, explicit_models=[*models, PIPELINE]).start()
        click.echo(f"ready in {server.startup_s:.1f} s: HTTP {server.http_url}, gRPC {server.grpc_url}")
        click.echo(f"server log: {server.log_file}")
        click.echo(f"production: {production_command(repo)}")
    try:
        with step("5. classify held-out digits over HTTP and gRPC", timings):
            paths = [path for path, _ in samples]
            run_cli(
                "modelship", "infer", *paths[:4], "--model", "digits_onnx", "--url", server.http_url, "--top-k", "3"
            )
            truth = np.array([label for _, label in samples])
            summary.accuracy = _accuracy_table(server, models, paths, truth)
        with step(f"6. classify a digit image with curl alone: {PIPELINE} decodes and preprocesses it", timings):
            output = pipeline_output(Manifest.read(export_dir).artifact("onnx"))  # the name the ensemble serves
            script = curl_example(server.http_url, PIPELINE, shlex.quote(str(paths[0])), output, classes=3)
            click.echo(script)
            answer = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False).stdout
            click.echo(f"-> {answer.strip()}")
            summary.curl = curl_answer(answer, output, str(paths[0]), LABELS[samples[0][1]])
            click.echo(f"curl's top class for {paths[0].name}: {summary.curl.label} (right)")
        with step("7. parity of the served models against the checkpoint", timings):
            for artifact, url, precision in (("onnx", server.grpc_url, "fp32"), ("onnx_fp16", server.http_url, "fp16")):
                parity(
                    summary, export_dir, "--arch", ARCH, "--artifact", artifact, "--served", url,
                    "--served-model", f"digits_{artifact}", "--served-precision", precision,
                )  # fmt: skip
            samples_dir = training / "samples"
            parity(
                summary, export_dir, "--arch", ARCH, "--artifact", "onnx", "--images", samples_dir,
                "--served", server.http_url, "--served-model", PIPELINE,
            )  # fmt: skip
    finally:
        with step("8. stop Triton", timings):
            server.stop()
    click.secho("\ndemo finished: " + ", ".join(f"{k.split('.')[0]}: {v:.1f} s" for k, v in timings.items()), bold=True)
    return timings


def parity(summary: DemoSummary, export_dir: Path, *args: object) -> None:
    """`modelship parity EXPORT_DIR ARGS`, its verdicts (read from the report it writes) added to the summary."""
    report = export_dir / REPORT_NAME
    report.unlink(missing_ok=True)
    try:
        run_cli("modelship", "parity", export_dir, *args)
    finally:
        if report.is_file():
            for data in json.loads(report.read_text())["reports"]:
                verdict = ParityReport.from_dict(data)
                summary.parity.append(
                    ParityVerdict(
                        verdict.candidate, verdict.reference, verdict.passed, verdict.batch_sizes, verdict.error
                    )
                )


def _accuracy_table(server: TritonServer, models: list[str], paths: list[Path], truth: np.ndarray) -> list[AccuracyRow]:
    click.echo(f"\n{'model':<26}{'protocol':<10}{'accuracy':>9}   predictions (first 10)")
    rows = []
    for model in models:
        for url in (server.http_url, server.grpc_url):
            with TritonClient(url) as client:
                result = classify(client, model, paths, batch=8, k=1)
            predicted = np.array([r["top_k"][0]["index"] for r in result])
            rows.append(
                AccuracyRow(model, client.protocol, len(paths), float((predicted == truth).mean()), predicted.tolist())
            )
            shown = " ".join(LABELS[i] for i in predicted[:10])
            click.echo(f"{model:<26}{client.protocol:<10}{rows[-1].accuracy:>9.1%}   {shown}")
    click.echo(f"{'truth':<45}   {' '.join(LABELS[i] for i in truth[:10])}")
    agree = all(row.predictions == rows[0].predictions for row in rows)
    click.echo(f"all {len(rows)} model/protocol pairs agree on every image: {agree}")
    return rows


if __name__ == "__main__":
    main()
