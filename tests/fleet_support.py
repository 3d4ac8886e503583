"""What the fleet tests share: the model they roll out, the rollout command over a fleet's servers, and the versions
a server serves."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cli_contract import invoke, port_flags
from tests.processes import ready_json

MODEL = "tiny_onnx"
REPO_ROOT = Path(__file__).resolve().parents[1]
SERVE = (sys.executable, "-c", "from modelship.cli.main import main; main()", "serve", "--json")


def rollout(fleet: dict, version: int, *extra: object) -> tuple[int, dict]:
    args = ["rollout", MODEL, "--version", version, "--export", fleet["good"]]
    for server, key in zip(fleet["servers"], fleet["keys"], strict=True):
        args += ["--server", server.http_url, "--api-key-file", key]
    result = invoke(*args, *extra, "--json")
    assert result.stdout.strip(), result.output + repr(result.exception)
    return result.exit_code, json.loads(result.stdout)


def serving(server: Any) -> list[str]:
    with urllib.request.urlopen(f"{server.http_url}/v2/models/{MODEL}", timeout=10) as response:
        return json.loads(response.read())["versions"]


@dataclass
class Replica:
    process: subprocess.Popen
    http_url: str
    grpc_url: str
    api_key_file: Path
    log: Path  # the supervisor's lines (serve's stderr)

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(timeout=60) == 0


def start_replica(url: str, root: Path, index: int, *models: str) -> Replica:
    """`modelship serve --repo URL --model MODEL...` (default: MODEL) on free ports, its stderr in root."""
    key, log = root / f"replica{index}.key", root / f"replica{index}.log"
    args = [
        *SERVE,
        "--repo",
        url,
        *(w for m in models or (MODEL,) for w in ("--model", m)),
        "--api-key-file",
        str(key),
        *port_flags(),
    ]
    process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)  # noqa: SIM115
    ready = ready_json(process)
    return Replica(process, ready["http"], ready["grpc"], key, log)
