"""The flags that say where models live and which server to talk to, defined once for every command that takes
them: `--repo` (publish, serve, deploy), a server address with its protocol (infer's `--url`, parity's
`--served`), and the repository-API secret files a client sends (rollout)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from modelship.serve.protocols import WireProtocol
from modelship.serve.publish import DEFAULT_REPO
from modelship.serve.restricted_api import API_KEY_HEADER

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
OBJECT_STORE = (
    "S3-compatible object storage (s3://bucket/prefix with AWS_ENDPOINT_URL, or s3://host:port/bucket/prefix for a "
    "custom endpoint; credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION)"
)


def repo_option(purpose: str, *, object_store_only: bool = False) -> Decorator:
    """`--repo`: the Triton model repository a command `purpose` ("to publish into", ...); a folder (default
    model_repo/) or object storage, or object storage only (then required)."""
    if object_store_only:
        help_text = f"The model repository {purpose}: {OBJECT_STORE}."
        return click.option("--repo", required=True, metavar="s3://BUCKET/PREFIX", help=help_text)
    return click.option(
        "--repo",
        default=str(DEFAULT_REPO),
        show_default=True,
        metavar="DIR|s3://BUCKET/PREFIX",
        help=f"Triton model repository {purpose}: a folder, or {OBJECT_STORE}.",
    )


def protocol_option(address_flag: str, default: WireProtocol | None) -> Decorator:
    """`--protocol` for the server address given by `address_flag`, when that address has no scheme; the command
    receives it as a WireProtocol (None when not given and no default)."""
    return click.option(
        "--protocol",
        type=click.Choice([p.value for p in WireProtocol]),
        callback=_wire_protocol,
        default=None if default is None else default.value,
        show_default=default is not None,
        help=f"http (default port 8000) or grpc (8001), for {address_flag} when its URL has no scheme.",
    )


def _wire_protocol(_ctx: click.Context, _param: click.Parameter, value: str | None) -> WireProtocol | None:
    return None if value is None else WireProtocol(value)


def url_option(flag: str, dest: str, help_text: str) -> Decorator:
    """A server address flag (`--url`, `--served`): http://HOST:PORT, grpc://HOST:PORT or HOST:PORT."""
    return click.option(flag, dest, default=None, metavar="URL", help=f"{help_text} (http://HOST:PORT, "
                        "grpc://HOST:PORT or HOST:PORT).")  # fmt: skip


def api_key_files_option() -> Decorator:
    """`--api-key-file` as a client reads it: the secret `modelship serve` wrote, one per server or one for all."""
    return click.option(
        "--api-key-file",
        "key_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=f"File holding a server's repository-API secret (sent as header {API_KEY_HEADER}): one for all "
        "servers, or one per --server in order.",
    )
