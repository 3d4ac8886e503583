"""A real S3-compatible HTTP server for tests and benchmarks: moto_server on a free loopback port, with a bucket,
and the AWS variables boto3 and tritonserver read pointing at it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from modelship.serve.ports import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "modelship",
    "AWS_SECRET_ACCESS_KEY": "modelship",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str

    def url(self, prefix: str = "repo") -> str:
        """The Triton form of a location in the bucket: s3://127.0.0.1:PORT/bucket/prefix."""
        return f"s3://{self.endpoint.split('://', 1)[1]}/{self.bucket}/{prefix}"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")


@contextmanager
def moto_server(bucket: str = "models") -> Iterator[ObjectStore]:
    """Start moto_server, create `bucket`, set the AWS variables (restored after), stop the server at the end."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved = {k: os.environ.get(k) for k in (*CREDENTIALS, "AWS_ENDPOINT_URL")}
    os.environ.update(CREDENTIALS)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        store = ObjectStore(endpoint, bucket)
        store.client().create_bucket(Bucket=bucket)
        yield store
    finally:
        process.terminate()
        process.wait(timeout=10)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
