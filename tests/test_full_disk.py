"""A full disk and a read-only filesystem, for real (tmpfs mounts; skipped where mounting is not allowed):
one clear line naming the path, and nothing half-written or changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from serve_exports import write_export

from modelship.serve.publish import publish_export
from tests.checkpoint_factory import TinyNet, realistic, save_form
from tests.cli_contract import expect_failure

pytestmark = pytest.mark.slow
TINY = "tests.checkpoint_factory:make_tinynet"


@pytest.fixture
def mount(tmp_path: Path):
    """mount(size) -> a fresh tmpfs of that size; remount(read_only) switches it."""
    mounted: list[Path] = []

    def make(size: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)]).returncode:
            pytest.skip("cannot mount a tmpfs here (needs root)")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def read_only(point: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)


def fill(point: Path, leave_bytes: int) -> None:
    """Fill the filesystem at `point` until `leave_bytes` are free."""
    import os

    stat = os.statvfs(point)
    free = stat.f_bavail * stat.f_frsize
    (point / "filler").write_bytes(b"\0" * max(0, free - leave_bytes))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return save_form(tmp_path_factory.mktemp("disk") / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")


def test_export_to_a_full_disk(mount, ckpt: Path) -> None:
    out = mount("4m")
    fill(out, 16 * 1024)
    args = ["export", ckpt, "--arch", TINY, "--onnx", "--torchscript", "--input", "x:batch,3,16,16", "--out", out]
    payload = expect_failure(args, names=["No space left on device"], untouched=[])
    assert "--exporter legacy" not in payload["error"]
    assert sorted(p.name for p in out.iterdir()) == ["filler"]


def test_export_to_a_read_only_folder(mount, ckpt: Path) -> None:
    out = mount("1m")
    read_only(out)
    args = ["export", ckpt, "--arch", TINY, "--input", "x:batch,3,16,16", "--out", out / "exports"]
    expect_failure(args, names=[str(out), "Read-only file system", "--out"], untouched=[out])


def test_publish_to_a_full_disk_changes_nothing(mount, tmp_path: Path) -> None:
    disk = mount("8m")
    repo = disk / "repo"
    export_dir = write_export(tmp_path / "tiny")
    publish_export(export_dir, repo)
    fill(disk, 8 * 1024)
    expect_failure(["publish", export_dir, "--repo", repo], names=["No space left on device"], untouched=[repo])
    assert sorted(p.name for p in disk.iterdir()) == [".repo.lock", "filler", "repo"]


def test_publish_to_a_read_only_repository(mount, tmp_path: Path) -> None:
    disk = mount("8m")
    repo = disk / "repo"
    export_dir = write_export(tmp_path / "tiny")
    publish_export(export_dir, repo)
    read_only(disk)
    expect_failure(["publish", export_dir, "--repo", repo], names=["Read-only file system", "--repo"], untouched=[repo])
