"""kill -9 at random points of export-model and of publish: nothing half-visible, all or nothing across artifacts.

A publisher killed while it commits leaves a journal; the next publisher (or `modelship serve` starting) rolls it
back, so after recovery every model is exactly as before (or, when the kill came after the commit, exactly as a
finished publish leaves it). The publisher is slowed (tests/slow_cli.py) so kills land inside the commit.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serve_exports import write_export

from modelship.serve import repository
from modelship.serve.publish import publish_export
from tests.checkpoint_factory import TinyNet, realistic, save_form
from tests.cli_contract import snapshot

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).resolve().parents[1]
SLOW_CLI = (sys.executable, str(Path(__file__).with_name("slow_cli.py")))
TINY = "tests.checkpoint_factory:make_tinynet"


def killed_after(command: list[str], seconds: float, **env: str) -> None:
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env={**__import__("os").environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(seconds)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_kill_during_export_leaves_nothing_half_written(tmp_path: Path) -> None:
    ckpt = save_form(tmp_path / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")
    out = tmp_path / "exports"
    command = [*SLOW_CLI, "export", str(ckpt), "--arch", TINY, "--input", "x:batch,3,16,16", "--out", str(out)]
    rng = random.Random(0)
    for _ in range(4):
        killed_after([*command, "--force"], rng.uniform(2.0, 7.0))
        dest = out / "tiny"
        if dest.exists():  # whole, or not there
            manifest = json.loads((dest / "manifest.json").read_text())
            assert all((dest / a["file"]).is_file() for a in manifest["artifacts"])
    finished = subprocess.run([*command, "--force", "--json"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert [p.name for p in out.iterdir()] == ["tiny"], "a killed export's staging folder was left behind"


def test_kill_during_publish_is_all_or_nothing(tmp_path: Path, report_figure) -> None:
    export_dir = write_export(tmp_path / "tiny")
    rng = random.Random(1)
    outcomes = []
    for trial in range(4):
        repo = tmp_path / f"repo{trial}"
        publish_export(export_dir, repo)
        before = snapshot(repo)
        command = [*SLOW_CLI, "publish", str(export_dir), "--repo", str(repo)]
        killed_after(command, rng.uniform(2.0, 5.5), SLOW_RENAME_S="0.25")  # 16 renames: about 4 s of commit
        journal = next(repository.staging_root(repo).glob("*/journal.json"), None)
        half = journal is not None and not json.loads(journal.read_text())["done"]
        with repository.locked(repo):  # what the next publisher or `modelship serve` does first
            pass
        versions = {model.name: repository.versions(model) for model in repo.iterdir()}
        assert not half or snapshot(repo) == before, "a half-applied publish was not rolled back"
        if snapshot(repo) != before:  # the kill came after the commit: every model has its new version
            assert all(v == [1, 2] for v in versions.values()), versions
        assert not repository.staging_root(repo).exists()
        outcomes.append("mid-commit, rolled back" if half else "before or after the commit")
    assert "mid-commit, rolled back" in outcomes, outcomes
    report_figure(f"publish killed 4 times: {', '.join(outcomes)}; the repository was all old or all new each time")
