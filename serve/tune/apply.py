"""`tune --apply`: the winner written into the repository folder, through the same locked, staged, journaled commit
as publish (a kill midway is rolled back by the next publish or serve). Only the winning artifact's config.pbtxt
changes, as `configs.override` changes a served config (the protobuf through its JSON form, which is Triton's):
its instances (the published kind kept), intra-op threads, largest batch and queue delay; every other field as
published."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from modelship.contract.errors import TuneError
from modelship.serve import repository
from modelship.serve.object_store import is_object_store
from modelship.serve.triton_config import parse_config, to_text
from modelship.serve.tune.configs import override
from modelship.serve.tune.space import Candidate

CONFIG = "config.pbtxt"


def apply_winner(repo: Path, winner: Candidate) -> Path:
    """Write `winner` into `repo/<artifact>/config.pbtxt`; the path written."""
    if is_object_store(str(repo)):
        raise TuneError("--apply writes a repository folder", hint="object storage is not supported by --apply yet")
    target = repo / winner.artifact / CONFIG
    if not target.is_file():
        raise TuneError(f"--apply: no {target}", hint="pass the --repo the server serves")
    served = parse_config(target.read_text(), str(target))
    published = json_format.MessageToDict(served, preserving_proto_field_name=True)
    config = json_format.ParseDict(override(published, winner), mc.ModelConfig())
    with repository.locked(repo):
        plan = repository.StagedChanges(repository.staging_dir(repo))
        staged = plan.folder / winner.artifact / CONFIG
        staged.parent.mkdir(parents=True)
        staged.write_text(to_text(config))
        parse_config(staged.read_text(), str(staged))
        plan.replace(staged, target)
        repository.commit(plan)
    return target
