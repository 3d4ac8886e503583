"""Ports and addresses for local servers: free ports picked together, why a port cannot be bound, loopback."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket

from modelship.contract.errors import ServeError


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(host, 1)[0]


def free_ports(host: str = "127.0.0.1", count: int = 1) -> list[int]:
    """`count` distinct ports free on `host` now (bound together, so the system cannot hand out one twice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def bind_problem(host: str, port: int) -> int | None:
    """None if (host, port) can be bound now, else the errno why (EADDRINUSE: something listens there;
    EADDRNOTAVAIL: not an address of this machine). A port merely in TIME_WAIT counts as free, as it does for
    Triton."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        return errno.EADDRNOTAVAIL
    with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno or errno.EADDRINUSE
    return None


def listening(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True once something accepts TCP connections on (host, port)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_ports(host: str, ports: dict[str, int]) -> None:
    """Refuse ports something already listens on (readiness probes would otherwise reach the other server),
    out of range, or on an address that is not this machine's."""
    if len(set(ports.values())) < len(ports):
        raise ServeError(f"HTTP, gRPC and metrics ports must differ, got {ports}")
    for kind, port in ports.items():
        if not 0 < port < 65536:
            raise ServeError(f"--{kind}-port {port} is not a port number", hint="use 1-65535")
        problem = bind_problem(host, port)
        if problem == errno.EADDRINUSE:
            raise ServeError(
                f"{kind} port {port} on {host} is already in use",
                hint=f"stop the other server or pick another port (--{kind}-port)",
                details={"port": port},
            )
        if problem is not None:
            raise ServeError(
                f"cannot listen on {host}:{port} ({os.strerror(problem)})",
                hint="--host must be an address of this machine (127.0.0.1, 0.0.0.0 or one of its interfaces); "
                "ports below 1024 need root",
                details={"host": host, "port": port, "errno": problem},
            )
