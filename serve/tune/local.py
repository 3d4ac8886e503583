"""The local server tune measures on when given a repository folder: a Triton of its own, in explicit model-control
mode, serving the model and the other artifacts of its export found in the folder (never the pipelines)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from google.protobuf import json_format

from modelship.contract.errors import TuneError
from modelship.serve.object_store import is_object_store
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.serve.tune.configs import export_of

CONFIG = "config.pbtxt"


def export_models(repo: Path, model: str) -> list[str]:
    """`model` and the models of the same export in `repo` (by the export record publish wrote), `model` first."""
    if is_object_store(str(repo)):
        raise TuneError("tune starts a local server on a repository folder only",
                        hint="serve the bucket with `modelship serve --repo s3://...` and pass its --url")  # fmt: skip
    if not (repo / model / CONFIG).is_file():
        present = sorted(p.parent.name for p in repo.glob(f"*/{CONFIG}"))
        raise TuneError(f"no model {model!r} in {repo}", hint=f"models there: {', '.join(present) or 'none'}")
    export = _export(repo / model / CONFIG)
    found = [model]
    if export is not None:
        found += sorted(
            p.parent.name for p in repo.glob(f"*/{CONFIG}") if p.parent.name != model and _export(p) == export
        )
    return found


def _export(path: Path) -> str | None:
    config = parse_config(path.read_text(), str(path))
    return export_of(json_format.MessageToDict(config, preserving_proto_field_name=True))


@contextmanager
def local_server(repo: Path, model: str, log: Callable[[str], None]) -> Iterator[TritonServer]:
    models = export_models(repo, model)
    log(f"starting a local Triton on {repo} with {', '.join(models)}")
    with TritonServer(repo, explicit_models=models) as server:
        yield server
