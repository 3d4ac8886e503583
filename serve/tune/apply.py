"""`tune --apply`: the winner written into the repository the server reads, a folder or object storage, and loaded
from there.

What changes: the winning artifact's config.pbtxt, as `configs.override` changes a served config (the protobuf
through its JSON form, which is Triton's): its instances (the published kind kept), intra-op threads, largest batch
and queue delay, every other field as published; and, when a pipeline was tuned and another artifact won, the
pipeline's config.pbtxt pointing its step at it (`configs.repoint`, as the server measured it).

A folder changes through publish's locked, staged, journaled commit: both configs or neither (a kill midway is
rolled back by the next publish or serve). Object storage has no rename: under publish's lock each config is one
PUT (its `version_policy` kept, so the versions listed stay the same), the artifact's first, the pipeline's last,
so a reader sees the tuned artifact before the pipeline steps into it and never a pipeline over an untuned one.
Once written, the artifact is loaded from the repository, then the pipeline when it was re-pointed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.errors import TuneError, UsageError
from modelship.contract.json_object import JsonObject
from modelship.serve import repository
from modelship.serve.client import TritonClient
from modelship.serve.object_store import S3Location, is_object_store
from modelship.serve.triton_config import parse_config, to_text
from modelship.serve.tune.configs import export_of, override, repoint, steps
from modelship.serve.tune.space import Candidate

CONFIG = "config.pbtxt"
Read = Callable[[str], JsonObject]


class ConfigStore(Protocol):
    def read(self, model: str) -> JsonObject: ...

    def write(self, configs: dict[str, JsonObject]) -> list[str]:
        """Write each model's config, in order; where each went."""
        ...


def check_target(repo: str, model: str) -> None:
    """Refuse, before any work, a repository folder that does not hold `model` (the server serves another)."""
    if not is_object_store(repo) and not (Path(repo) / model / CONFIG).is_file():
        raise UsageError(f"--apply writes into --repo, and {repo} holds no model {model!r}",
                         hint="pass the --repo folder the server serves")  # fmt: skip


def apply_and_load(
    client: TritonClient, repo: str, winner: Candidate, pipeline: str | None, log: Callable[[str], None]
) -> list[str]:
    """Write `winner` (and `pipeline` pointed at it) into `repo`, then load what changed from there on the server
    `client` reaches; the configs written."""
    applied = apply_winner(repo, winner, pipeline)
    loaded = [winner.artifact] + ([pipeline] if pipeline and len(applied) > 1 else [])
    for model in loaded:
        client.load(model)
    log(f"applied: {', '.join(applied)}; {', '.join(loaded)} loaded from there")
    return applied


def apply_winner(repo: str, winner: Candidate, pipeline: str | None = None) -> list[str]:
    """Write `winner` (and `pipeline` pointed at it) into `repo`; the configs written."""
    with _opened(repo) as store:
        return store.write(changes(store.read, winner, pipeline))


def changes(read: Read, winner: Candidate, pipeline: str | None) -> dict[str, JsonObject]:
    """The configs `--apply` writes, as the repository holds them now changed: the winner's artifact first, then the
    pipeline when its step is another artifact."""
    written = {winner.artifact: override(read(winner.artifact), winner)}
    if pipeline is None:
        return written
    config = read(pipeline)
    step = next((s for s in steps(config) if export_of(read(s)) is not None), None)
    if step is None:
        raise TuneError(f"--apply: {pipeline} steps into no model published by modelship")
    if step != winner.artifact:
        written[pipeline] = repoint(config, read(step), read(winner.artifact))
    return written


@contextlib.contextmanager
def _opened(repo: str) -> Iterator[ConfigStore]:
    if is_object_store(repo):
        from modelship.serve.object_store import client
        from modelship.serve.s3_publish import locked

        location = S3Location.parse(repo)
        s3 = client(location)
        with locked(s3, location):
            yield BucketConfigs(s3, location)
        return
    folder = Path(repo)
    with repository.locked(folder):
        yield FolderConfigs(folder)


def _as_json(text: str, where: str) -> JsonObject:
    return json_format.MessageToDict(parse_config(text, where), preserving_proto_field_name=True)


def _as_text(config: JsonObject, where: str) -> str:
    text = to_text(json_format.ParseDict(config, mc.ModelConfig()))
    parse_config(text, where)
    return text


class FolderConfigs:
    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def read(self, model: str) -> JsonObject:
        path = self.repo / model / CONFIG
        if not path.is_file():
            raise TuneError(f"--apply: no {path}", hint="pass the --repo the server serves")
        return _as_json(path.read_text(), str(path))

    def write(self, configs: dict[str, JsonObject]) -> list[str]:
        plan = repository.StagedChanges(repository.staging_dir(self.repo))
        for model, config in configs.items():
            staged = plan.folder / model / CONFIG
            staged.parent.mkdir(parents=True)
            staged.write_text(_as_text(config, str(staged)))
            plan.replace(staged, self.repo / model / CONFIG)
        repository.commit(plan)
        return [str(self.repo / model / CONFIG) for model in configs]


class BucketConfigs:
    def __init__(self, s3: Any, location: S3Location) -> None:
        self.s3, self.location = s3, location

    def read(self, model: str) -> JsonObject:
        key = self.location.key(model, CONFIG)
        try:
            body = self.s3.get_object(Bucket=self.location.bucket, Key=key)["Body"].read().decode()
        except self.s3.exceptions.NoSuchKey:
            where = f"{self.location}/{model}/{CONFIG}"
            raise TuneError(f"--apply: no {where}", hint="pass the --repo the server serves") from None
        return _as_json(body, f"{self.location}/{model}/{CONFIG}")

    def write(self, configs: dict[str, JsonObject]) -> list[str]:
        for model, config in configs.items():
            text = _as_text(config, f"{self.location}/{model}/{CONFIG}")
            self.s3.put_object(Bucket=self.location.bucket, Key=self.location.key(model, CONFIG), Body=text.encode())
        return [f"{self.location.triton_url}/{model}/{CONFIG}" for model in configs]
