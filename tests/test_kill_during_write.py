"""kill -9 in the middle of export-model and of publish: nothing half-visible, all or nothing across artifacts.

Each kill is timed by what the killed process has done, not by a delay: an export is killed once it has started
writing files, a publish once its commit has applied a chosen number of its renames (the publisher is slowed,
tests/slow_cli.py, so that the kill lands between two of them). A publisher killed while it commits leaves a
journal; the next publisher (or `modelship serve` starting) rolls it back, so after recovery every model is exactly
as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from serve_exports import write_export

from modelship.contract.staging import JOURNAL, Change
from modelship.serve import repository
from modelship.serve.publish import publish_export
from tests.checkpoint_factory import TinyNet, realistic, save_form
from tests.cli_contract import snapshot
from tests.processes import kill_when

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).resolve().parents[1]
SLOW_CLI = (sys.executable, str(Path(__file__).with_name("slow_cli.py")))
TINY = "tests.checkpoint_factory:make_tinynet"


def kill_export_while_writing(command: list[str], out: Path) -> list[Path]:
    """Run `command` (an export into `out`) and SIGKILL it once it has written a file that was not in `out` before;
    the files its staging folders hold after the kill (none: the kill missed the write)."""
    before = set(out.rglob("*"))
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_when(process, lambda: any(p.is_file() and p not in before for p in out.rglob("*")))
    return [p for p in out.glob(".*.staging/**/*") if p.is_file()]


def test_kill_during_export_leaves_nothing_half_written(tmp_path: Path) -> None:
    ckpt = save_form(tmp_path / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")
    out, dest = tmp_path / "exports", tmp_path / "exports" / "tiny"
    out.mkdir()
    command = [*SLOW_CLI, "export", str(ckpt), "--arch", TINY, "--input", "x:batch,3,16,16", "--out", str(out)]
    staged = kill_export_while_writing(command, out)
    assert not dest.exists(), "a killed export left a folder where the export goes"
    assert staged, "the kill did not land while the export was writing"
    finished = subprocess.run([*command, "--json"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert [p.name for p in out.iterdir()] == ["tiny"], "a killed export's staging folder was left behind"
    before = snapshot(dest)
    staged = kill_export_while_writing([*command, "--force"], out)
    assert snapshot(dest) == before, "a killed --force export changed the export it replaces"
    assert staged, "the kill did not land while the export was writing"


def commit_progress(journals: Path) -> tuple[int, int] | None:
    """(changes applied, changes planned) of the commit journaled under `journals`; None before its journal."""
    try:
        journal = next(journals.glob(f"*/{JOURNAL}"))
        changes = [Change(**c) for c in json.loads(journal.read_text())["changes"]]
    except (StopIteration, FileNotFoundError):
        return None
    return sum(not Path(c.source).exists() if c.source else Path(c.backup).exists() for c in changes), len(changes)


@pytest.mark.parametrize("share", [0.5, 1.0], ids=["halfway", "before the last rename"])
def test_kill_during_publish_is_all_or_nothing(tmp_path: Path, share: float) -> None:
    """Killed inside the commit, `share` of the way through its renames (the next waits SLOW_RENAME_S): the next
    publisher rolls it back."""
    export_dir = write_export(tmp_path / "tiny")
    repo = tmp_path / "repo"
    publish_export(export_dir, repo)
    before = snapshot(repo)
    command = [*SLOW_CLI, "publish", str(export_dir), "--repo", str(repo)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env={**os.environ, "SLOW_RENAME_S": "0.25"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    journals = repository.staging_root(repo)

    def reached() -> bool:
        progress = commit_progress(journals)
        return progress is not None and progress[0] >= int(share * (progress[1] - 1))

    kill_when(process, reached)
    done, planned = commit_progress(journals) or (0, 0)
    assert int(share * (planned - 1)) <= done < planned, f"the kill missed the commit ({done} of {planned} renames)"
    with repository.locked(repo):  # what the next publisher or `modelship serve` does first
        pass
    assert snapshot(repo) == before, "a half-applied publish was not rolled back"
    assert not journals.exists()
