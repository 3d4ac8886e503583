"""tune's constraints, judged in one place (serve.tune.constraints): the p99 budget and the throughput floor together.
No config meeting both is refused the same way whichever one is out of reach: exit 1, one line naming the closest
point on each, one JSON object with `ok: false` under --json. Before, `--min-throughput 1e9` ended `ok: true`,
"default wins". On fakes: the search runs on tests/test_tune_search.py's surface, no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_tune_search import DEFAULT, SPACE, surface

from modelship.contract.errors import TuneError
from modelship.serve.tune import run
from modelship.serve.tune.confirm import confirm
from modelship.serve.tune.constraints import Constraints, Verdict
from modelship.serve.tune.local import Server
from modelship.serve.tune.measurement import Point
from modelship.serve.tune.run import TuneRequest, TuneResult
from modelship.serve.tune.search import HillClimb, drive
from modelship.serve.tune.space import Candidate
from tests.cli_contract import expect_failure, invoke


def at(p99_ms: float, throughput: float, concurrency: int = 4) -> Point:
    return Point(DEFAULT, concurrency, throughput, p99_ms / 2, p99_ms)


@pytest.mark.parametrize(
    ("p99_ms", "throughput", "verdict"),
    [
        (50.0, 100.0, Verdict(True, True, 0.0)),  # exactly on both lines: met
        (75.0, 100.0, Verdict(False, True, 0.5)),  # p99 half over the budget
        (50.0, 80.0, Verdict(True, False, 0.2)),  # a fifth short of the floor
        (100.0, 50.0, Verdict(False, False, 1.5)),  # both: the shortfalls add
    ],
)
def test_one_judge_gives_both_verdicts_and_how_far_a_point_falls_short(
    p99_ms: float, throughput: float, verdict: Verdict
) -> None:
    judged = Constraints(50.0, min_throughput=100.0).judge(at(p99_ms, throughput))
    assert (judged.latency, judged.throughput) == (verdict.latency, verdict.throughput)
    assert judged.shortfall == pytest.approx(verdict.shortfall)
    assert judged.met == (verdict.latency and verdict.throughput)


def test_without_a_floor_only_the_p99_budget_counts() -> None:
    assert Constraints(50.0).judge(at(50.0, 0.0)).met
    assert Constraints(50.0).judge(at(60.0, 1e9)).shortfall == pytest.approx(0.2)
    assert Constraints(50.0).describe() == "p99 50 ms"
    assert Constraints(50.0, 1e9).describe() == "p99 50 ms at 1e+09/s"


def test_the_closest_point_on_each_constraint_is_named_in_one_line() -> None:
    points = [at(10.0, 50.0, 1), at(40.0, 300.0, 8), at(90.0, 400.0, 32)]
    constraints = Constraints(5.0, min_throughput=1000.0)
    assert constraints.closest(points) == {"p99": points[0], "throughput": points[2]}
    assert Constraints(5.0).closest(points) == {"p99": points[0]}
    error = constraints.unmet("m_onnx", points, "out/tune.json")
    said = str(error)
    assert "\n" not in said and said.startswith("no config of m_onnx meets p99 5 ms at 1000/s")
    assert "the closest on p99: m_onnx x1 inst" in said and "at 1 clients, p99 10.0 ms, 50.0/s" in said
    assert "the closest on throughput: " in said and "at 32 clients, p99 90.0 ms, 400.0/s" in said
    assert "--p99-ms" in said and "--min-throughput" in said and "out/tune.json" in said
    assert error.details["closest"]["throughput"]["throughput"] == 400.0
    assert "no point was measured" in str(Constraints(5.0).unmet("m_onnx", [], "r"))


def test_a_winner_below_the_floor_in_any_round_does_not_hold() -> None:
    winner = Candidate("m_int8", 1, 2, 16, 100)
    rounds = iter([300.0, 90.0, 300.0])

    def measure(candidate: Candidate, concurrency: int) -> Point:
        if candidate == DEFAULT:
            return at(30.0, 50.0)
        return Point(winner, 4, next(rounds), 10.0, 20.0)

    found = confirm(measure, at(30.0, 50.0), Point(winner, 4, 300.0, 10.0, 20.0), Constraints(50.0, 100.0))
    assert not found.holds and found.ratio > 1.0


def tuned(constraints: Constraints) -> TuneResult:
    """What `tune` gives on the surface: the climb from the default, nothing confirmed."""
    search = drive(HillClimb(SPACE, DEFAULT, constraints), surface)
    request = TuneRequest("m_onnx", constraints, SPACE.cores)
    return TuneResult(request, SPACE, search, search.evaluations[DEFAULT], None)


@pytest.mark.parametrize("constraints", [Constraints(0.01), Constraints(200.0, min_throughput=1e9)])
def test_an_unreachable_budget_or_floor_is_refused_alike(constraints: Constraints) -> None:
    result = tuned(constraints)
    assert not result.met and result.to_dict()["ok"] is False
    with pytest.raises(TuneError, match=r"^no config of m_onnx meets .*; the closest on p99: ") as refused:
        result.require_met("r/tune.json")
    assert ("the closest on throughput" in str(refused.value)) == bool(constraints.min_throughput)
    reachable = tuned(Constraints(200.0, min_throughput=10.0))
    assert reachable.met and reachable.to_dict()["ok"] is True
    reachable.require_met("r/tune.json")


@pytest.fixture
def on_the_surface(monkeypatch: pytest.MonkeyPatch) -> None:
    """`modelship tune` with its server replaced by the surface (what `tune_on` measures, nothing started)."""

    def tune_on(server: Server, request: TuneRequest, progress: run.Progress = lambda line: None) -> TuneResult:
        return tuned(request.constraints)

    monkeypatch.setattr(run, "tune_on", tune_on)


@pytest.mark.usefixtures("on_the_surface")
@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--p99-ms", "0.01"], ["no config of m_onnx meets p99 0.01 ms", "the closest on p99", "--p99-ms"]),
        (
            ["--p99-ms", "200", "--min-throughput", "1e6"],
            ["meets p99 200 ms at 1e+06/s", "the closest on p99", "the closest on throughput", "--min-throughput"],
        ),
    ],
)
def test_the_cli_refuses_either_unreachable_constraint_the_same_way(
    flags: list[str], names: list[str], tmp_path: Path
) -> None:
    payload = expect_failure(["tune", "m_onnx", "--repo", tmp_path, *flags, "--out", tmp_path / "r"], names=names,
                             code=1)  # fmt: skip
    assert set(payload) == {"ok", "error", "closest", "report"}
    assert json.loads((tmp_path / "r" / "tune.json").read_text())["ok"] is False  # every point, kept


@pytest.mark.usefixtures("on_the_surface")
def test_the_cli_reports_a_config_meeting_both(tmp_path: Path) -> None:
    result = invoke("tune", "m_onnx", "--repo", tmp_path, "--p99-ms", 200, "--min-throughput", 10,
                    "--out", tmp_path / "r", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True and payload["min_throughput"] == 10.0 and payload["winner"]["best"] is not None
