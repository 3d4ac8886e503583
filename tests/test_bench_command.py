"""`modelship bench` around its measurements: where a run is written (the user's cache, never the checkout), a
baseline saved per suite, a run compared with it (exit 1 naming a regressed row), flags refused. Nothing here
measures: runs are read back with --from-run or made by a stand-in for the suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelship.bench.report import MachineInfo, Report, Row, results_dir, write_json
from modelship.cli.main import main

REPO = Path(__file__).resolve().parents[1]


def _run(quick: bool = True) -> Report:
    point = {"ratios": [0.6, 0.62, 0.63, 0.64], "relative_error": 0.015}
    rows = [
        Row("serving", "small onnx b8 c1 grpc", 0.62, "served / in-process throughput", 248.0, 400.0, "inf/s",
            data=point),
        Row("serving", "small onnx b1 c1 grpc vs fastapi peer", 1.15, "modelship gRPC / peer throughput", 180.0,
            156.5, "inf/s", data=point),
        Row("transport", "small b8 (4.8 MB) c1 grpc-shm", 0.93, "served / in-process throughput", 372.0, 400.0,
            "inf/s"),
    ]  # fmt: skip
    machine = MachineInfo(2, "Test CPU", None, "Linux-6.1-x86_64", "x86_64", "3.11.7", {"torch": "2.14.1"})
    timed = {"serving": 200.04, "transport": 39.96}
    return Report(
        rows, quick, "2026-12-05T10:00:00", 240.0, machine, suites=["serving", "transport"], suite_seconds=timed
    )


def bench(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["bench", *args])
    return result.exit_code, result.stdout, result.stderr


def test_raw_runs_go_to_the_users_cache_never_the_checkout(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert results_dir() == tmp_path / "home" / ".cache" / "modelship" / "bench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert results_dir() == tmp_path / "cache" / "modelship" / "bench"
    measured = []
    monkeypatch.setattr("modelship.cli.bench._measure", lambda *args: measured.append(args) or _run())
    code, out, _ = bench("--quick", "--json")
    assert code == 0
    assert measured[0][:2] == (["serving", "transport"], True)  # --quick's suites
    written = Path(json.loads(out)["json"])
    assert written == tmp_path / "cache" / "modelship" / "bench" / "2026-12-05-100000-quick.json" and written.is_file()
    assert not written.is_relative_to(REPO)


def test_a_saved_baseline_passes_unchanged_and_a_row_edited_30_percent_better_fails_by_name(tmp_path) -> None:
    run = write_json(_run(), tmp_path / "run.json")
    folder = tmp_path / "baselines"
    code, out, _ = bench("--from-run", str(run), "--save-baseline", str(folder), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["comparison"] is None
    assert payload["baselines_saved"] == [str(folder / "serving-quick.json"), str(folder / "transport-quick.json")]
    assert json.loads((folder / "transport-quick.json").read_text())["seconds"] == 40.0  # the suite's, not the run's

    code, out, _ = bench("--from-run", str(run), "--against", str(folder), "--json")
    comparison = json.loads(out)["comparison"]
    assert code == 0 and comparison["ok"] and comparison["summary"] == "3 rows compared: 3 same"

    saved = json.loads((folder / "serving-quick.json").read_text())
    saved["rows"][0]["ratio"] = round(saved["rows"][0]["ratio"] * 1.3, 4)
    (folder / "serving-quick.json").write_text(json.dumps(saved))
    code, out, err = bench("--from-run", str(run), "--against", str(folder / "serving-quick.json"))
    assert code == 1
    assert "worse: serving/small onnx b8 c1 grpc: 0.806 -> 0.62 (-23%, allowed -13%/+15%)" in out
    assert "2 rows compared: 1 worse, 1 same" in out
    assert "regression: serving/small onnx b8 c1 grpc" in err


def test_a_baseline_of_the_other_mode_or_an_unknown_suite_is_refused_before_measuring(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("modelship.cli.bench._measure", lambda *args: pytest.fail("measured"))
    run = write_json(_run(), tmp_path / "run.json")
    bench("--from-run", str(run), "--save-baseline", str(tmp_path))
    code, out, _ = bench("--suite", "serving", "--against", str(tmp_path / "serving-quick.json"), "--json")
    assert code == 2 and json.loads(out)["error"].endswith("serving-quick.json is a --quick baseline (add --quick)")
    code, out, _ = bench("--against", str(tmp_path), "--json")
    assert code == 2 and "has no baseline for export, serving" in json.loads(out)["error"]
    code, out, _ = bench("--suite", "growth", "--json")
    assert code == 2 and "unknown suite(s) in --suite: growth" in json.loads(out)["error"]
    code, out, _ = bench("--from-run", str(run), "--quick", "--json")
    assert code == 2 and "--from-run measures nothing" in json.loads(out)["error"]


def test_help_says_what_every_suite_measures() -> None:
    from modelship.bench.suites import SUITES

    shown = CliRunner().invoke(main, ["bench", "--help"], terminal_width=120).output
    described = {line.split()[0] for line in shown.splitlines() if line.startswith("  ") and line.split()}
    assert set(SUITES) <= described, set(SUITES) - described
