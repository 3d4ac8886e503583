"""What every failing command owes its user, checked in one place: a non-zero exit, exactly one JSON object with
--json (`ok: false` and an `error` naming the cause), no traceback, and nothing changed on disk."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from modelship.cli.main import main


def invoke(*args: object, cwd: Path | None = None) -> Result:
    """Run `modelship ARGS` in-process (optionally from `cwd`)."""
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        os.chdir(previous)


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file and folder under `roots` with a digest of its content (what "nothing changed" compares)."""
    state: dict[str, str] = {}
    for root in roots:
        if not root.exists():
            state[str(root)] = "absent"
            continue
        for path in sorted([root, *root.rglob("*")]):
            state[str(path)] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def expect_failure(
    args: Iterable[object],
    *,
    names: Iterable[str],
    code: int | None = None,
    untouched: Iterable[Path] = (),
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run `args` twice (with and without --json) and check the failure contract; returns the JSON object.

    `names`: substrings the error must contain (the cause: a file, a field, a flag, a value).
    `untouched`: folders (or files' folders) that must be byte-identical afterwards.
    """
    args = [str(a) for a in args]
    roots = list(untouched)
    before = snapshot(*roots)
    plain = invoke(*args, cwd=cwd)
    as_json = invoke(*args, "--json", cwd=cwd)
    for result in (plain, as_json):
        assert result.exit_code != 0, result.output
        if code is not None:
            assert result.exit_code == code, (result.exit_code, result.output)
        assert isinstance(result.exception, SystemExit) or result.exception is None, _trace(result)
        assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    payload = json.loads(as_json.stdout)  # exactly one JSON object: json.loads refuses trailing data
    assert payload["ok"] is False, payload
    error = payload["error"]
    assert "\n" not in error.strip(), error
    for text in names:
        assert text in error, (text, error)
        assert text in plain.stderr, (text, plain.stderr)
    assert snapshot(*roots) == before, "files changed on disk"
    return payload


def _trace(result: Result) -> str:
    import traceback

    return "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else result.output


def port_flags(**given: object) -> list[str]:
    """`--http-port H --grpc-port G --metrics-port M` for `modelship serve`: the ports `given` (http=, grpc=,
    metrics=), the others free ports picked together, as the product picks them (serve.ports.free_ports)."""
    from modelship.serve.ports import free_ports

    kinds = ("http", "grpc", "metrics")
    fresh = iter(free_ports(count=sum(kind not in given for kind in kinds)))
    return [word for kind in kinds for word in (f"--{kind}-port", str(given[kind] if kind in given else next(fresh)))]
