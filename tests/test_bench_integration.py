"""`modelship bench --quick` end to end on the small model: real export, real Triton, real clients."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from modelship.cli.main import main


@pytest.mark.integration
@pytest.mark.slow
def test_bench_quick_batching_suite_writes_one_json_report(tmp_path) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        ["bench", "--quick", "--suite", "batching", "--out", str(out), "--work-dir", str(tmp_path / "work"), "--json"],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["quick"] is True and payload["errors"] == {}
    (row,) = payload["rows"]
    assert row["suite"] == "batching" and row["ratio"] > 0
    assert row["data"]["average_batch"]["small_onnx_nobatch"] == pytest.approx(1.0)
    assert json.loads((out / payload["json"].rsplit("/", 1)[-1]).read_text())["rows"] == payload["rows"]


def test_bench_rejects_an_unknown_suite(tmp_path) -> None:
    result = CliRunner().invoke(main, ["bench", "--suite", "nope", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 2
    assert "unknown suite" in json.loads(result.stdout)["error"]
