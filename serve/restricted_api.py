"""Triton's restricted APIs: the groups that change a running server, opened by a per-server secret header.

`modelship serve` starts Triton with these groups behind `API_KEY_HEADER`; the secret lives in a 0600 file in a 0700
folder (`state_dir`), and every client that changes the server (the server manager, the rollout) sends it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from modelship.serve.protocols import WireProtocol

# Triton's API groups that change a running server, behind the per-server secret; inference, health, metadata,
# statistics and the model config stay open.
RESTRICTED_APIS = ("model-repository", "logging", "trace", "shared-memory")
API_KEY_HEADER = "modelship-api-key"  # the header Triton checks before any restricted-API request
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"  # how a gRPC request carries that header


def secret_headers(secret: str | None, protocol: WireProtocol = WireProtocol.HTTP) -> dict[str, str]:
    """The header that opens the restricted APIs over `protocol` (empty without a secret): gRPC carries it behind
    GRPC_HEADER_PREFIX."""
    if not secret:
        return {}
    return {(GRPC_HEADER_PREFIX if protocol is WireProtocol.GRPC else "") + API_KEY_HEADER: secret}


def write_secret(path: Path) -> str:
    """A new random secret in `path`, created 0600 (owner only) in a 0700 folder; returns it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_urlsafe(32)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    return secret


def state_dir() -> Path:
    """Where per-server secrets live: $XDG_RUNTIME_DIR/modelship, else ~/.cache/modelship/servers."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "modelship" if runtime else Path.home() / ".cache" / "modelship" / "servers"
