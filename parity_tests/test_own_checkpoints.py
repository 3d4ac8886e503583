"""`--checkpoints DIR`: every checkpoint in DIR/checkpoints.toml exported with its own export-model arguments and
checked with `modelship parity` (random batches 1 and 4, plus real photos when it has a preprocessing spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import PHOTOS, assert_all_passed, invoke
from .own_checkpoints import OwnCheckpoint

pytestmark = pytest.mark.slow


def test_own_checkpoint(own_checkpoint: OwnCheckpoint, photos: Path, parity, tmp_path: Path) -> None:
    entry = own_checkpoint
    args = [str(entry.file), *entry.export_args, "--name", entry.name, "--out", str(tmp_path)]
    code, exported = invoke("export", *args)
    assert code == 0 and exported["ok"], f"export-model {' '.join(args)} failed: {exported.get('error')}"
    images = entry.images if entry.images is not None else bool(exported.get("preprocess"))
    folder = photos if images is True else images
    parity_args = ["--batch-sizes", "1,4", *entry.parity_args, *(["--images", str(folder)] if images else [])]
    if ":" in exported["source"]["arch"]:  # project code named by export_args: parity needs it named again
        parity_args += ["--arch", exported["source"]["arch"]]
    code, payload = parity(f"own-{entry.name}", Path(exported["folder"]), *parity_args)
    assert code == 0, payload.get("error")
    sizes = {1, 4} | ({len(PHOTOS)} if images is True else set())
    assert_all_passed(payload, [a["name"] for a in exported["artifacts"]], sizes)
