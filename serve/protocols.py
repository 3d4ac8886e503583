"""The wire protocols Triton answers on, and where a local server answers each by default."""

from __future__ import annotations

from enum import StrEnum


class WireProtocol(StrEnum):
    HTTP = "http"
    GRPC = "grpc"


DEFAULT_URLS = {WireProtocol.HTTP: "127.0.0.1:8000", WireProtocol.GRPC: "127.0.0.1:8001"}
