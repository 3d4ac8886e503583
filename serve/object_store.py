"""Model repositories in S3-compatible object storage: where they are, how to reach them, and one-line errors.

A location is `s3://bucket/prefix` (the endpoint from `AWS_ENDPOINT_URL`, else AWS) or Triton's own form for a
custom endpoint, `s3://host:port/bucket/prefix`. Credentials and region come from the standard AWS variables
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION`), which tritonserver
reads too. Bucket names must be lowercase: Triton's S3 client cannot read others.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelship.contract.errors import PublishError

SCHEME = "s3://"
# what tritonserver (and boto3) read for S3: passed through to the server's environment unchanged
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_ENDPOINT = re.compile(r"^[A-Za-z0-9.-]+:\d+$")


def is_object_store(repo: str | Path) -> bool:
    return str(repo).startswith(SCHEME)


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # "" or "a/b" (no leading or trailing slash)
    endpoint: str | None  # http://host:port, or None for AWS

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """`s3://bucket/prefix` or `s3://host:port/bucket/prefix`; a PublishError naming what is wrong."""
        if not is_object_store(url):
            raise PublishError(f"{url}: not an s3:// location", hint="write s3://bucket/prefix")
        parts = [p for p in url[len(SCHEME) :].split("/") if p]
        endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
        if parts and _ENDPOINT.match(parts[0]):
            endpoint = f"http://{parts.pop(0)}"
        if not parts:
            raise PublishError(f"{url}: no bucket in the location", hint="write s3://bucket/prefix")
        bucket, prefix = parts[0], "/".join(parts[1:])
        if not _BUCKET.match(bucket):
            raise PublishError(
                f"{url}: bucket name {bucket!r} cannot be read by Triton (S3 bucket names are 3-63 lowercase letters, "
                "digits, dots and hyphens)",
                hint="use a lowercase bucket name",
            )
        return cls(bucket, prefix, endpoint)

    @property
    def triton_url(self) -> str:
        """The location as tritonserver's --model-repository takes it (the endpoint inside the path)."""
        host = f"{self.endpoint.split('://', 1)[-1]}/" if self.endpoint else ""
        return f"{SCHEME}{host}{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return self.triton_url


def client(location: S3Location) -> Any:
    """A boto3 S3 client for `location` that fails fast (short timeouts, no retry storm) and checks the bucket:
    PublishError for an unreachable endpoint, a missing bucket or refused credentials."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    config = Config(connect_timeout=3, read_timeout=30, retries={"max_attempts": 2}, s3={"addressing_style": "path"})
    # a new session: credentials and region are read from the environment now, not cached from an earlier client
    s3 = boto3.session.Session().client("s3", endpoint_url=location.endpoint, config=config)
    where = location.endpoint or "AWS S3"
    try:
        s3.head_bucket(Bucket=location.bucket)
    except NoCredentialsError:
        raise PublishError(
            f"{location}: no AWS credentials", hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        ) from None
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket"):
            raise PublishError(f"{location}: bucket {location.bucket!r} does not exist at {where}",
                               hint="create it, or fix the bucket name") from None  # fmt: skip
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise PublishError(f"{location}: {where} refused the credentials ({code})",
                               hint="check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY") from None  # fmt: skip
        raise PublishError(f"{location}: {where} answered {code}: {exc}") from None
    except BotoCoreError as exc:
        raise PublishError(
            f"{location}: cannot reach {where} ({type(exc).__name__})",
            hint="check AWS_ENDPOINT_URL or the host:port in the location",
        ) from None
    return s3
