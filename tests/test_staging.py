"""The journaled all-or-nothing move (modelship.contract.staging) that exports and model repositories share: an
error undoes what was applied, and a dead process's half-applied plan is rolled back before its leftovers go."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modelship.contract.errors import ExportError, os_failure
from modelship.contract.staging import StagedChanges, commit, staging_folder, sweep


def failure(path: Path, exc: OSError) -> ExportError:
    return os_failure(ExportError, exc, f"{path}: cannot move", "fix it")


def folder_with(parent: Path, name: str, text: str) -> Path:
    folder = parent / name
    folder.mkdir()
    (folder / "file.txt").write_text(text)
    return folder


def test_replacing_a_folder_swaps_it_in_one_commit(tmp_path: Path) -> None:
    dest = folder_with(tmp_path, "export", "old")
    new = folder_with(tmp_path, "new", "new")
    plan = StagedChanges(staging_folder(tmp_path, "export", "replaced"))
    plan.remove(dest)
    plan.new(new, dest)
    commit(plan, failure)
    assert (dest / "file.txt").read_text() == "new" and not new.exists()


def test_an_error_part_way_puts_everything_back(tmp_path: Path) -> None:
    dest = folder_with(tmp_path, "export", "old")
    plan = StagedChanges(staging_folder(tmp_path, "export", "replaced"))
    plan.remove(dest)
    plan.new(tmp_path / "missing", dest)  # the second rename fails
    with pytest.raises(ExportError, match="cannot move"):
        commit(plan, failure)
    assert (dest / "file.txt").read_text() == "old"


def test_a_dead_processs_half_applied_plan_is_rolled_back_by_the_next_sweep(tmp_path: Path) -> None:
    dest = folder_with(tmp_path, "export", "old")
    new = folder_with(tmp_path, "new", "new")
    # a child process journals a replace, moves the old export aside, and dies before the new one lands
    script = f"""
import os
from pathlib import Path
from modelship.contract import staging
plan = staging.StagedChanges(staging.staging_folder(Path({str(tmp_path)!r}), "export", "replaced"))
plan.remove(Path({str(dest)!r}))
plan.new(Path({str(new)!r}), Path({str(dest)!r}))
staging._write_journal(plan.folder / staging.JOURNAL, plan.changes, done=False)
(plan.folder / "backup").mkdir()
staging._apply(plan.changes[0])
os._exit(9)
"""
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 9
    assert not dest.exists()  # the old export sits in the dead process's staging folder
    removed = sweep(tmp_path)
    assert len(removed) == 1 and (dest / "file.txt").read_text() == "old" and new.exists()
