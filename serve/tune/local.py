"""The server tune measures on: a running Triton reached by its URL, or, given a repository folder, a Triton of its
own, in explicit model-control mode, serving the model and the other artifacts of its export found in the folder;
for a pipeline, also its steps (the preprocess or tokenize model) and the pipeline itself, last."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from google.protobuf import json_format

from modelship.contract.errors import TuneError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.serve.client import TritonClient, split_url
from modelship.serve.object_store import is_object_store
from modelship.serve.ports import is_loopback
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config
from modelship.serve.tune.configs import export_of, steps

CONFIG = "config.pbtxt"


@dataclass(frozen=True)
class Server:
    """Where tune measures: the Triton at `url` (sent its repository-API secret `api_key`), else one of its own
    started on the folder `repo`; `--apply` writes into `repo` either way."""

    repo: str
    url: str | None = None
    api_key: str | None = None

    def cores(self, given: int | None = None) -> int:
        """The server's cores: `given`, else this machine's when the server is local or on loopback (the URL read
        as the client reads it, its host as the standard library splits it)."""
        local = self.url is None or is_loopback(urlsplit(f"//{split_url(self.url)[1]}").hostname or "")
        cores = given or (os.cpu_count() if local else None)
        if cores is None:
            raise UsageError(f"tune cannot read the cores of {self.url} from here", hint="pass --server-cores N")
        return cores


@contextmanager
def connected(server: Server, model: str, log: Callable[[str], None]) -> Iterator[TritonClient]:
    """A client of `server`: the one at its URL, else a local Triton started for `model` (stopped on exit)."""
    if server.url is not None:
        with TritonClient(server.url, api_key=server.api_key, concurrency=1) as client:
            yield client
        return
    with local_server(Path(server.repo), model, log) as triton, triton.client() as client:
        yield client


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
