"""`modelship bench --quick` end to end on the small model: real export, real Triton, real clients; its baseline
saved and the same run compared with it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from modelship.cli.main import main


@pytest.mark.integration
@pytest.mark.slow
def test_bench_quick_transport_suite_writes_one_report_and_a_baseline_it_matches(tmp_path) -> None:
    out, baselines = tmp_path / "results", tmp_path / "baselines"
    args = ["bench", "--quick", "--suite", "transport", "--out", str(out), "--work-dir", str(tmp_path / "work")]
    result = CliRunner().invoke(main, [*args, "--save-baseline", str(baselines), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["quick"] is True and payload["errors"] == {}
    assert [row["case"] for row in payload["rows"]] == ["small b8 (4.8 MB) c1 grpc-shm"]
    assert all(row["suite"] == "transport" and row["ratio"] > 0 for row in payload["rows"])
    assert json.loads((out / payload["json"].rsplit("/", 1)[-1]).read_text())["rows"] == payload["rows"]
    assert payload["baselines_saved"] == [str(baselines / "transport-quick.json")]
    again = CliRunner().invoke(main, ["bench", "--from-run", payload["json"], "--against", str(baselines), "--json"])
    assert again.exit_code == 0, again.output
    # the same figures: never a change; a run whose own spread is wide is "noisy" (not judged) rather than "same"
    assert json.loads(again.stdout)["comparison"]["summary"] in {"1 row compared: 1 same", "1 row compared: 1 noisy"}
