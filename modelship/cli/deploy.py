"""`modelship deploy kserve NAME --repo s3://...`: the Kubernetes manifests that serve a model from object storage
with KServe's Triton runtime (serve.kserve)."""

from __future__ import annotations

from pathlib import Path

import click

from modelship.cli.main import GuardedCommand, emit_json, json_option
from modelship.cli.numbers import SECONDS, whole
from modelship.cli.server_flags import repo_option
from modelship.contract.errors import UsageError


@click.group("deploy")
def deploy_group() -> None:
    """Write deployment manifests for a model repository in object storage."""


@deploy_group.command("kserve", cls=GuardedCommand)
@click.argument("model", metavar="NAME")
@repo_option("to serve from", object_store_only=True)
@click.option("--service", default=None, help="InferenceService name. Default: NAME with '_' as '-'.")
@click.option(
    "--load-seconds",
    type=SECONDS,
    default=None,
    help="Model load time to size the startup probe. Default: measured now, by a local tritonserver on --repo.",
)
@click.option("--gpus", type=whole(0, 1024), default=0, show_default=True, help="GPUs per replica.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the YAML here (default: stdout).",
)
@json_option
def kserve_command(
    model: str,
    repo: str,
    service: str | None,
    load_seconds: float | None,
    gpus: int,
    out: Path | None,
    as_json: bool,
) -> None:
    """An InferenceService (KServe's Triton runtime, storageUri = --repo, explicit model control loading NAME),
    the Secret and ServiceAccount its storage initializer reads S3 credentials from (placeholders: credentials are
    never written), and a startup probe sized from NAME's load time."""
    from modelship.serve.kserve import KServeSpec, manifests, to_yaml
    from modelship.serve.object_store import S3Location, is_object_store

    if not is_object_store(repo):
        raise UsageError(f"--repo {repo}: KServe reads models from object storage", hint="publish to s3://... first")
    location = S3Location.parse(repo)
    name = service or model.replace("_", "-").lower()
    seconds = load_seconds if load_seconds is not None else _measure_load(repo, model)
    documents = manifests(KServeSpec(name, model, location, seconds, gpus))
    text = to_yaml(documents)
    if out is not None:
        out.write_text(text)
    if as_json:
        emit_json({"ok": True, "service": name, "load_seconds": round(seconds, 2), "manifests": documents,
                   "file": str(out) if out else None})  # fmt: skip
    elif out is None:
        click.echo(text, nl=False)
    else:
        click.echo(
            f"wrote {out} (startup probe sized for a {seconds:.1f} s load); fill in the Secret, then kubectl apply"
        )


def _measure_load(repo: str, model: str) -> float:
    from modelship.serve.server import TritonServer

    with TritonServer(repo, explicit_models=[model]) as server:
        return float(server.startup_s or 0.0)
