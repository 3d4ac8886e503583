"""Publish to a model repository in S3-compatible object storage, never showing a reader a partial version.

Object storage has no rename, so visibility is the config: every config.pbtxt written here lists the versions Triton
may load (`version_policy: specific`), and it is written last, in one PUT, after every object of the new version
is uploaded and verified (size, and the sha256 recorded in the object's metadata). A publisher killed at any point
leaves at most an unlisted, invisible version folder; its number is never reused (a new version is one past every
number present, complete or not). Publishers to one location take turns through a lock object written with a
conditional PUT (`If-None-Match: *`); a lock whose holder died on this host, or older than LOCK_TTL_S, is taken over.

The files themselves are built exactly as for a local repository (serve.publish, in a temporary folder), so configs,
verification and the pipeline models are the same. `publish_to` publishes to either, as the location says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modelship.contract.errors import PublishError
from modelship.contract.manifest import Manifest
from modelship.contract.staging import process_alive
from modelship.serve.model_staging import CONFIG_FILE
from modelship.serve.object_store import S3Location, client, is_object_store
from modelship.serve.publish import PublishedModel, PublishOptions, PublishResult, publish_with
from modelship.serve.triton_config import ServingOptions, parse_config, to_text

LOCK_KEY = ".modelship-publish.lock"
LOCK_TTL_S = 600.0
LOCK_TIMEOUT_S = 300.0
SHA_METADATA = "sha256"
LOCK_TAKEN = ("PreconditionFailed", "412", "ConditionalRequestConflict")  # the conditional PUT lost the race


def publish_to(repo: str | Path, export_dir: Path, options: PublishOptions) -> PublishResult:
    """Publish into a local folder (serve.publish) or an s3:// location (`publish_to_s3`)."""
    if is_object_store(repo):
        return publish_to_s3(export_dir, str(repo), options)
    return publish_with(export_dir, Path(repo), options)


def publish_to_s3(export_dir: Path, url: str, options: PublishOptions | None = None) -> PublishResult:
    """`serve.publish.publish_export` into `url` (s3://...): one new version for every model it writes."""
    options = options or PublishOptions()
    location = S3Location.parse(url)
    s3 = client(location)
    base = options.name or Manifest.read(export_dir).name
    keep = (options.serving or ServingOptions()).keep_versions
    with locked(s3, location), tempfile.TemporaryDirectory(prefix="modelship-s3-") as tmp:
        present = _versions_present(s3, location)
        mine = {m: v for m, v in present.items() if m.startswith(f"{base}_")}
        number = options.version or 1 + max((max(v) for v in mine.values() if v), default=0)
        local = publish_with(export_dir, Path(tmp) / "repo", dataclasses.replace(options, version=number))
        taken = [m.name for m in local.models if number in present.get(m.name, set())]
        if taken:
            raise PublishError(
                f"{location}: version {number} of {', '.join(taken)} is already present",
                hint="versions are immutable: omit --version for the next one",
            )
        result = PublishResult(repo=Path(location.triton_url), notes=local.notes)
        for model in local.models:
            _upload_model(s3, location, Path(tmp) / "repo" / model.name, model.name, number, keep)
            result.models.append(
                PublishedModel(model.name, model.artifact, number, Path(location.triton_url) / model.name / str(number),
                               Path(location.triton_url) / model.name / CONFIG_FILE, model.sha256)
            )  # fmt: skip
    return result


def _upload_model(s3: Any, location: S3Location, folder: Path, model: str, number: int, keep: int) -> None:
    """Version objects first (each verified), then the model-level files, then the config that lists the version."""
    version_dir = folder / str(number)
    for path in sorted(p for p in version_dir.rglob("*") if p.is_file()):
        _put_verified(s3, location, location.key(model, str(number), path.relative_to(version_dir).as_posix()), path)
    config = parse_config((folder / CONFIG_FILE).read_text(), str(folder / CONFIG_FILE))
    visible = sorted({*_listed_versions(s3, location, model), number})
    config.version_policy.specific.versions[:] = visible[-keep:] if keep else visible
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and version_dir not in p.parents):
        if path.name != CONFIG_FILE:
            _put_verified(s3, location, location.key(model, path.relative_to(folder).as_posix()), path)
    body = to_text(config).encode()
    s3.put_object(Bucket=location.bucket, Key=location.key(model, CONFIG_FILE), Body=body)  # the visibility switch


def _put_verified(s3: Any, location: S3Location, key: str, path: Path) -> None:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=location.bucket, Key=key, Body=data, Metadata={SHA_METADATA: digest})
    head = s3.head_object(Bucket=location.bucket, Key=key)
    if head["ContentLength"] != len(data) or head.get("Metadata", {}).get(SHA_METADATA) != digest:
        raise PublishError(f"s3://{location.bucket}/{key}: the stored object differs from {path} after upload")


def _versions_present(s3: Any, location: S3Location) -> dict[str, set[int]]:
    """Every model under the prefix and the version numbers that have objects (complete or not)."""
    found: dict[str, set[int]] = {}
    root = location.key() + "/" if location.prefix else ""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=root):
        for item in page.get("Contents", []):
            parts = item["Key"][len(root) :].split("/")
            if len(parts) >= 2 and not parts[0].startswith("."):
                found.setdefault(parts[0], set())
                if len(parts) >= 3 and parts[1].isdigit():
                    found[parts[0]].add(int(parts[1]))
    return found


def _listed_versions(s3: Any, location: S3Location, model: str) -> list[int]:
    """The versions the model's current config lets Triton load (none when it has no config yet)."""
    try:
        text = s3.get_object(Bucket=location.bucket, Key=location.key(model, CONFIG_FILE))["Body"].read().decode()
    except s3.exceptions.NoSuchKey:
        return []
    return list(parse_config(text, f"{location}/{model}/{CONFIG_FILE}").version_policy.specific.versions)


@contextlib.contextmanager
def locked(s3: Any, location: S3Location, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the location's publish lock (a conditional PUT); take over a stale one."""
    from botocore.exceptions import ClientError

    key = location.key(LOCK_KEY)
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            s3.put_object(Bucket=location.bucket, Key=key, Body=json.dumps(owner).encode(), IfNoneMatch="*")
            break
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in (
                "PreconditionFailed",
                "412",
                "ConditionalRequestConflict",
            ):
                raise
        if _stale(s3, location.bucket, key):
            s3.delete_object(Bucket=location.bucket, Key=key)
            continue
        if time.monotonic() > deadline:
            raise PublishError(f"{location}: another publisher holds {key} for over {timeout_s:.0f} s")
        time.sleep(0.5)
    try:
        yield
    finally:
        s3.delete_object(Bucket=location.bucket, Key=key)


def _stale(s3: Any, bucket: str, key: str) -> bool:
    try:
        holder = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except (s3.exceptions.NoSuchKey, ValueError):
        return True
    if time.time() - float(holder.get("time", 0)) > LOCK_TTL_S:
        return True
    pid = holder.get("pid")
    return holder.get("host") == socket.gethostname() and isinstance(pid, int) and not process_alive(pid)
