"""The local server tune measures on when given a repository folder: a Triton of its own, in explicit model-control
mode, serving the model and the other artifacts of its export found in the folder; for a pipeline, also its steps
(the preprocess or tokenize model) and the pipeline itself, last."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from google.protobuf import json_format

from modelship.contract.errors import TuneError
from modelship.contract.json_object import JsonObject
from modelship.serve.object_store import is_object_store
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.serve.tune.configs import export_of, steps

CONFIG = "config.pbtxt"


def export_models(repo: Path, model: str) -> list[str]:
    """The models tuning `model` loads: the artifacts of its export in `repo` (by the export record publish wrote),
    the one served first; for a pipeline, then its other steps and the pipeline."""
    if is_object_store(str(repo)):
        raise TuneError("tune starts a local server on a repository folder only",
                        hint="serve the bucket with `modelship serve --repo s3://...` and pass its --url")  # fmt: skip
    configs = {p.parent.name: p for p in repo.glob(f"*/{CONFIG}")}
    if model not in configs:
        raise TuneError(f"no model {model!r} in {repo}", hint=f"models there: {', '.join(sorted(configs)) or 'none'}")
    pipeline = _config(configs[model])
    chained = [s for s in steps(pipeline) if s in configs]
    exports = {name: export_of(_config(configs[name])) for name in [*chained, model]}
    served = next((name for name in chained if exports[name] is not None), model)
    export = exports[served]
    found = [served]
    if export is not None:
        found += sorted(name for name in configs if name != served and export_of(_config(configs[name])) == export)
    return found + [name for name in [*chained, model] if name not in found]


def _config(path: Path) -> JsonObject:
    return json_format.MessageToDict(parse_config(path.read_text(), str(path)), preserving_proto_field_name=True)


@contextmanager
def local_server(repo: Path, model: str, log: Callable[[str], None]) -> Iterator[TritonServer]:
    models = export_models(repo, model)
    log(f"starting a local Triton on {repo} with {', '.join(models)}")
    with TritonServer(repo, explicit_models=models) as server:
        yield server
