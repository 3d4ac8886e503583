"""The parts of `modelship tune` around the search, without a server: a candidate as a Triton config and back,
windows until they agree, the winner confirmed against the default, and the journal that restores what a killed
tune changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelship.contract.errors import ClientError, TuneError
from modelship.serve.load.stats import LoadStats
from modelship.serve.tune.apply import apply_winner, changes
from modelship.serve.tune.configs import THREADS, override, published, repoint
from modelship.serve.tune.confirm import confirm
from modelship.serve.tune.constraints import Constraints
from modelship.serve.tune.measurement import Point, point_of, until_agreeing
from modelship.serve.tune.restore import Restorer, journal_path, recover
from modelship.serve.tune.space import Candidate

CONFIG = {
    "name": "m_onnx",
    "max_batch_size": 16,
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
    "dynamic_batching": {"max_queue_delay_microseconds": 100, "preferred_batch_size": [8]},
    "parameters": {"modelship.export": {"string_value": "{}"}},
    "input": [{"name": "image"}],
}


def test_the_published_config_is_the_candidate_its_backend_serves() -> None:
    assert published("m_onnx", CONFIG, cores=4) == Candidate("m_onnx", 1, 4, 16, 100)
    two = {**CONFIG, "instance_group": [{"count": 2}], "parameters": {THREADS: {"string_value": "1"}}}
    assert published("m_onnx", two, cores=4) == Candidate("m_onnx", 2, 1, 16, 100)


def test_a_candidate_changes_only_what_it_names() -> None:
    changed = override(CONFIG, Candidate("m_onnx", 2, 1, 32, 0))
    assert changed["instance_group"] == [{"kind": "KIND_CPU", "count": 2}]
    assert changed["parameters"][THREADS] == {"string_value": "1"} and "modelship.export" in changed["parameters"]
    assert changed["max_batch_size"] == 32 and changed["dynamic_batching"] == {"max_queue_delay_microseconds": 0}
    assert changed["input"] == CONFIG["input"] and CONFIG["instance_group"][0]["count"] == 1  # the original kept
    unbatched = override({**CONFIG, "max_batch_size": 0}, Candidate("m_onnx", 1, 2, 32, 0))
    assert unbatched["max_batch_size"] == 0


def stats(throughput: float) -> LoadStats:
    return LoadStats(1, 2, throughput, 1.0, 2.0, 3.0, 1.5)


def test_windows_run_until_three_agree_within_ten_percent() -> None:
    answers = iter([100.0, 140.0, 101.0, 99.0, 103.0, 500.0])
    windows, stable = until_agreeing(lambda: stats(next(answers)))
    assert stable and [w.throughput for w in windows] == [100.0, 140.0, 101.0, 99.0, 103.0]
    point = point_of(Candidate("m", 1, 1, 1, 0), windows, stable, 0.4)
    assert point.throughput == 101.0 and point.windows == 5 and point.concurrency == 2
    wild = iter([100.0, 200.0] * 10)
    windows, stable = until_agreeing(lambda: stats(next(wild)), most=6)
    assert not stable and len(windows) == 6


def point(candidate: Candidate, throughput: float, p99: float) -> Point:
    return Point(candidate, 4, throughput, p99 / 2, p99)


DEFAULT, WINNER = Candidate("m", 1, 2, 16, 100), Candidate("m_int8", 1, 2, 16, 100)


@pytest.mark.parametrize(
    ("winner_p99", "winner_throughput", "holds"), [(40.0, 300.0, True), (60.0, 300.0, False), (40.0, 90.0, False)]
)
def test_the_winner_holds_only_within_budget_in_every_round_and_faster(
    winner_p99: float, winner_throughput: float, holds: bool
) -> None:
    asked: list[Candidate] = []

    def measure(candidate: Candidate, concurrency: int) -> Point:
        asked.append(candidate)
        if candidate == DEFAULT:
            return point(DEFAULT, 100.0, 30.0)
        return point(WINNER, winner_throughput, winner_p99)

    found = confirm(measure, point(DEFAULT, 100.0, 30.0), point(WINNER, 300.0, 40.0), Constraints(50.0))
    assert found.holds is holds and len(found.rounds) == 3
    assert asked == [DEFAULT, WINNER] * 3  # interleaved


class FakeClient:
    url = "http://127.0.0.1:1"

    def __init__(self, fail: bool = False) -> None:
        self.loaded: list[tuple[str, dict]] = []
        self.fail = fail

    def load(self, name: str, config: dict) -> None:
        if self.fail:
            raise ClientError("the server went away")
        self.loaded.append((name, config))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def test_a_restorer_journals_the_first_config_and_restores_it(state: Path) -> None:
    client = FakeClient()
    journal = journal_path(client.url)
    restorer = Restorer(client, journal)  # type: ignore[arg-type]
    restorer.remember("m", {"v": 1})
    restorer.remember("m", {"v": 2})
    assert json.loads(journal.read_text())["models"] == {"m": {"v": 1}}
    assert restorer.restore() == ["m"] and client.loaded == [("m", {"v": 1})] and not journal.exists()


def test_a_killed_tunes_journal_is_restored_and_a_running_ones_refused(state: Path) -> None:
    client = FakeClient()
    journal = journal_path(client.url)
    journal.parent.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    journal.write_text(json.dumps({"pid": int(gone.stdout), "url": client.url, "models": {"m": {"v": 1}}}))
    assert recover(client, journal) == ["m"] and client.loaded == [("m", {"v": 1})] and not journal.exists()  # type: ignore[arg-type]
    journal.write_text(json.dumps({"pid": os.getppid(), "url": client.url, "models": {"m": {"v": 1}}}))
    with pytest.raises(TuneError, match="another tune"):
        recover(client, journal)  # type: ignore[arg-type]
    assert journal.exists()


def test_a_restore_that_fails_says_which_model_and_keeps_the_journal(state: Path) -> None:
    client = FakeClient(fail=True)
    restorer = Restorer(client, journal_path(client.url))  # type: ignore[arg-type]
    restorer.remember("m", {"v": 1})
    with pytest.raises(TuneError, match="could not restore the config of m"):
        restorer.restore()
    assert restorer.journal.exists()


def test_a_config_the_server_refuses_is_named_and_the_model_keeps_serving(state: Path) -> None:
    from modelship.serve.tune.live import LiveMeasurer
    from modelship.serve.tune.measurement import CandidateRefused

    client = FakeClient(fail=True)
    restorer = Restorer(client, journal_path(client.url))  # type: ignore[arg-type]
    measurer = LiveMeasurer(client, {"m_onnx": CONFIG}, restorer)  # type: ignore[arg-type]
    with pytest.raises(CandidateRefused, match=r"x2 inst.*did not load it"):
        measurer.serve(Candidate("m_onnx", 2, 1, 16, 100))
    assert "m_onnx" not in measurer.loaded and restorer.originals == {"m_onnx": CONFIG}


class IndexClient:
    """A server holding two artifacts of export `m`, one of another export, and m's pipeline over m_onnx."""

    url = "http://127.0.0.1:1"

    @staticmethod
    def config(export: str) -> dict:
        return {**CONFIG, "parameters": {"modelship.export": {"string_value": json.dumps({"export": export})}}}

    def repository_index(self) -> list:
        from modelship.serve.model_info import ModelState

        names = ("m_onnx", "m_onnx_fp16", "m_pipeline", "other_onnx", "other_pipeline")
        return [ModelState(n, "1", "READY") for n in names]

    def model_config(self, name: str) -> dict:
        if name.endswith("_pipeline"):
            steps = [{"model_name": "m_preprocess"}, {"model_name": "m_onnx" if name == "m_pipeline" else "gone"}]
            return {"name": name, "max_batch_size": 16, "ensemble_scheduling": {"step": steps}}
        return self.config("other" if name.startswith("other") else "m")


def test_the_artifacts_tuned_are_the_exports_and_a_pipeline_over_them_keeps_its_batch() -> None:
    from modelship.serve.tune.run import served_artifacts

    served = served_artifacts(IndexClient(), "m_onnx_fp16")  # type: ignore[arg-type]
    assert list(served.configs) == ["m_onnx_fp16", "m_onnx"] and served.batch_floor == 16 and not served.pipeline
    through = served_artifacts(IndexClient(), "m_pipeline")  # type: ignore[arg-type]
    assert list(through.configs) == ["m_onnx", "m_onnx_fp16"] and through.batch_floor == 16
    assert through.pipeline == IndexClient().model_config("m_pipeline")
    with pytest.raises(TuneError, match="other_pipeline is a pipeline over no ready model published by modelship"):
        served_artifacts(IndexClient(), "other_pipeline")  # type: ignore[arg-type]


def test_apply_writes_only_what_the_winner_changes_through_a_journaled_commit(tmp_path: Path) -> None:
    from tritonclient.grpc import model_config_pb2 as mc

    from modelship.serve.triton_config import parse_config, to_text

    config = mc.ModelConfig(name="m_onnx", platform="onnxruntime_onnx", max_batch_size=16)
    config.instance_group.add(count=1, kind=mc.ModelInstanceGroup.KIND_CPU)
    config.dynamic_batching.max_queue_delay_microseconds = 100
    config.dynamic_batching.preferred_batch_size.append(8)
    config.parameters["modelship.export"].string_value = "{}"
    target = tmp_path / "repo" / "m_onnx" / "config.pbtxt"
    target.parent.mkdir(parents=True)
    target.write_text(to_text(config))
    assert apply_winner(str(tmp_path / "repo"), Candidate("m_onnx", 2, 1, 32, 0)) == [str(target)]
    written = parse_config(target.read_text())
    assert [(g.count, g.kind) for g in written.instance_group] == [(2, mc.ModelInstanceGroup.KIND_CPU)]
    assert written.parameters[THREADS].string_value == "1"
    assert written.parameters["modelship.export"].string_value == "{}"
    assert written.max_batch_size == 32 and written.dynamic_batching.max_queue_delay_microseconds == 0
    assert list(written.dynamic_batching.preferred_batch_size) == [] and written.platform == "onnxruntime_onnx"
    assert not (tmp_path / ".repo.staging").exists()  # the staged change and its journal are gone


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One export published twice, its `_pipeline` over ONNX in one repository and over TorchScript in the other."""
    from serve_exports import write_export

    from modelship.serve.publish import publish_export

    root = tmp_path_factory.mktemp("pipelines")
    export = write_export(root / "tiny", fp16_io=False)
    repos = {}
    for artifact in ("onnx", "torchscript"):
        repos[artifact] = root / artifact
        publish_export(export, repos[artifact], artifacts=["onnx", "torchscript"], pipeline=artifact)
    return repos


def read_config(repo: Path) -> Callable[[str], dict]:
    from google.protobuf import json_format

    from modelship.serve.triton_config import parse_config

    def read(model: str) -> dict:
        config = parse_config((repo / model / "config.pbtxt").read_text())
        return json_format.MessageToDict(config, preserving_proto_field_name=True)

    return read


def as_message(config: dict):
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2 as mc

    return json_format.ParseDict(config, mc.ModelConfig())


def test_a_pipeline_repointed_is_the_pipeline_publish_writes_over_that_artifact(pipelines: dict[str, Path]) -> None:
    """TorchScript's tensors have other names (INPUT__0): matched by position, the re-pointed ensemble is exactly
    the one publish builds over TorchScript."""
    onnx, torchscript = read_config(pipelines["onnx"]), read_config(pipelines["torchscript"])
    moved = repoint(onnx("tiny_pipeline"), onnx("tiny_onnx"), onnx("tiny_torchscript"))
    assert moved == torchscript("tiny_pipeline")
    assert repoint(moved, onnx("tiny_torchscript"), onnx("tiny_onnx")) == onnx("tiny_pipeline")


def test_apply_changes_the_winner_and_points_the_pipeline_at_it(pipelines: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(pipelines["onnx"], repo)
    read = read_config(repo)
    before = {p: p.read_text() for p in repo.glob("*/config.pbtxt")}
    same = changes(read, Candidate("tiny_onnx", 2, 1, 8, 0), "tiny_pipeline")
    assert list(same) == ["tiny_onnx"]  # the pipeline already steps into the winner
    winner = Candidate("tiny_torchscript", 2, 1, 16, 1000)
    written = apply_winner(str(repo), winner, "tiny_pipeline")
    assert written == [str(repo / "tiny_torchscript" / "config.pbtxt"), str(repo / "tiny_pipeline" / "config.pbtxt")]
    expected = override(read_config(pipelines["onnx"])("tiny_torchscript"), winner)
    assert as_message(read("tiny_torchscript")) == as_message(expected)
    assert read("tiny_pipeline") == read_config(pipelines["torchscript"])("tiny_pipeline")
    after = {p: p.read_text() for p in repo.glob("*/config.pbtxt")}
    assert {p for p in after if after[p] != before[p]} == {Path(w) for w in written}
    assert not list(tmp_path.glob(".repo.staging*")) and not list(repo.glob(".*staging*"))


def test_a_grid_of_the_callers_loses_the_batches_a_loaded_pipeline_forbids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step loaded with a smaller batch than its pipeline's takes the pipeline down: no candidate goes under it."""
    from modelship.serve.tune.run import TuneRequest, open_session
    from modelship.serve.tune.space import Space

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    grid = Space(("m_onnx", "m_onnx_fp16"), 2, (1, 8, 16, 32))
    request = TuneRequest("m_pipeline", Constraints(100.0), 2)
    session = open_session(IndexClient(), request, lambda line: None, grid)  # type: ignore[arg-type]
    assert session.space.batch_sizes == (16, 32) and session.pipeline == "m_pipeline"
    assert session.start == Candidate("m_onnx", 1, 2, 16, 100) and session.measurer.step == "m_onnx"


@pytest.mark.parametrize(
    ("url", "local"),
    [(None, True), ("http://127.0.0.1:8000", True), ("grpc://[::1]:8001", True), ("localhost:8000", True),
     ("http://10.0.0.5:8000", False), ("grpc://triton.example:8001", False)],
)  # fmt: skip
def test_the_servers_cores_are_read_here_only_when_it_is_local(url: str | None, local: bool) -> None:
    from modelship.contract.errors import UsageError
    from modelship.serve.tune.local import Server

    server = Server("model_repo", url)
    assert server.cores(3) == 3
    if local:
        assert server.cores() == os.cpu_count()
    else:
        with pytest.raises(UsageError, match="--server-cores"):
            server.cores()


def test_a_url_the_client_cannot_read_is_refused_before_any_work() -> None:
    from modelship.serve.tune.local import Server

    with pytest.raises(ClientError, match="unsupported URL scheme 'ftp'"):
        Server("model_repo", "ftp://127.0.0.1:8000").cores()


def test_apply_checks_the_folder_then_writes_the_winner_and_loads_it(tmp_path: Path) -> None:
    from modelship.contract.errors import UsageError
    from modelship.serve.triton_config import to_text
    from modelship.serve.tune.apply import apply_and_load, check_target

    with pytest.raises(UsageError, match="--apply writes into --repo"):
        check_target(str(tmp_path), "m_onnx")
    check_target("s3://bucket/prefix", "m_onnx")  # object storage is checked when written
    target = tmp_path / "m_onnx" / "config.pbtxt"
    target.parent.mkdir()
    target.write_text(to_text(as_message({**CONFIG, "input": [{"name": "image", "data_type": "TYPE_FP32"}]})))
    check_target(str(tmp_path), "m_onnx")

    class Loads:
        def __init__(self) -> None:
            self.loaded: list[str] = []

        def load(self, name: str) -> None:
            self.loaded.append(name)

    client, said = Loads(), list[str]()
    written = apply_and_load(client, str(tmp_path), Candidate("m_onnx", 2, 1, 16, 0), None, said.append)  # type: ignore[arg-type]
    assert written == [str(target)] and client.loaded == ["m_onnx"] and "m_onnx loaded from there" in said[0]
