"""Every config `tune` changes on a server is put back: on exit, on Ctrl-C, and after a kill.

Before the first change to a model, its config as the server had it is written to a journal (one per server, in
the state folder beside the servers' secrets) with tune's pid. `restore` loads each back and deletes the journal.
A tune killed before it could restore leaves the journal: the next `tune` against that server (or the `modelship
serve` supervising it) finds it, sees its pid gone, and restores the configs it names first.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from modelship.contract.errors import ClientError, TuneError
from modelship.contract.json_object import JsonObject
from modelship.contract.staging import process_alive
from modelship.serve.client import TritonClient
from modelship.serve.restricted_api import state_dir


def journal_path(address: str) -> Path:
    """The journal of the server at `address` (host:port of its HTTP or gRPC endpoint, as tune was given it)."""
    key = hashlib.sha256(address.split("://", 1)[-1].encode()).hexdigest()[:16]
    return state_dir() / f"tune-{key}.json"


@dataclass
class Restorer:
    """The configs changed on one server (model -> its config before), journaled as they are recorded."""

    client: TritonClient
    journal: Path
    originals: dict[str, JsonObject] = field(default_factory=dict)

    def remember(self, model: str, config: JsonObject) -> None:
        """Record `model`'s config before its first change (later calls for the same model keep the first)."""
        if model in self.originals:
            return
        self.originals[model] = config
        self.journal.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        staged = self.journal.with_suffix(".tmp")
        staged.write_text(json.dumps({"pid": os.getpid(), "url": self.client.url, "models": self.originals}))
        os.replace(staged, self.journal)

    def restore(self) -> list[str]:
        """Load every recorded config back; the models restored. The journal goes once all are back."""
        restored = restore_configs(self.client, self.originals)
        self.originals.clear()
        self.journal.unlink(missing_ok=True)
        return restored


def restore_configs(client: TritonClient, configs: dict[str, JsonObject]) -> list[str]:
    failed = []
    for model, config in configs.items():
        try:
            client.load(model, config)
        except ClientError as exc:
            failed.append(f"{model} ({exc.message[:120]})")
    if failed:
        raise TuneError(
            f"could not restore the config of {', '.join(failed)} on {client.url}",
            hint="load them again with `modelship serve` or the repository API",
        )
    return list(configs)


def recover(client: TritonClient, journal: Path) -> list[str]:
    """Restore what a tune killed before restoring left changed; the models restored (none: nothing was left).
    A journal whose tune still runs is refused: two tunes on one server would measure each other."""
    if not journal.is_file():
        return []
    record = json.loads(journal.read_text())
    pid = int(record.get("pid", 0))
    if pid > 0 and pid != os.getpid() and process_alive(pid):
        raise TuneError(
            f"another tune (pid {pid}) is changing configs on {record.get('url', client.url)}",
            hint="wait for it to finish, or stop it (its configs are restored when it stops)",
        )
    restored = restore_configs(client, record.get("models", {}))
    journal.unlink(missing_ok=True)
    return restored
