"""`python -m modelship.demo` (what `make demo` runs), with the same arguments as `make demo`: the whole journey in a
temporary folder, judged by the results it writes (exports/demo-summary.json), not by its prose."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from modelship.contract.errors import DemoError
from modelship.demo.summary import SUMMARY_NAME, curl_answer
from modelship.demo.train import LABELS
from modelship.serve.image_pipeline import curl_example
from modelship.serve.server import TritonServer
from modelship.serve.triton_config import parse_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[1]
MODELS = ["digits_onnx", "digits_onnx_fp16", "digits_torchscript", "digits_torchscript_fp16"]


def run_demo(workdir: Path, *args: str) -> dict:
    """The demo as `make demo` runs it (`python -m modelship.demo`, plus `args`), in `workdir`; its summary."""
    done = subprocess.run(
        [sys.executable, "-m", "modelship.demo", *args], cwd=workdir, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((workdir / "exports" / SUMMARY_NAME).read_text())


def check_summary(summary: dict, workdir: Path, samples: int) -> None:
    assert summary["ok"] and summary["error"] is None and summary["samples"] == samples
    rows = summary["accuracy"]
    assert sorted({(r["model"], r["protocol"]) for r in rows}) == sorted(
        (m, p) for m in MODELS for p in ("http", "grpc")
    )
    assert all(r["images"] == samples and r["accuracy"] >= 0.9 for r in rows), rows
    fp32 = [r["predictions"] for r in rows if "fp16" not in r["model"]]
    assert all(p == fp32[0] for p in fp32)  # every fp32 model, over both protocols, gives the same answers
    curl = summary["curl"]
    assert curl["label"] == Path(curl["image"]).stem.split("_", 1)[1] == curl["expected"]
    verdicts = {(v["candidate"], tuple(v["batch_sizes"])): v["passed"] for v in summary["parity"]}
    assert all(verdicts.values()), summary["parity"]
    assert verdicts["triton:digits_pipeline", (1, samples)]  # every sample through the served pipeline
    assert {"triton:digits_onnx", "triton:digits_onnx_fp16"} <= {c for c, _ in verdicts}
    pipeline = parse_config((workdir / "model_repo" / "digits_pipeline" / "config.pbtxt").read_text())
    assert samples > pipeline.max_batch_size  # so the pipeline got several requests, judged as one set


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    workdir = tmp_path_factory.mktemp("demo")
    return workdir, run_demo(workdir)


def test_make_demo_classifies_serves_and_proves_parity(demo: tuple[Path, dict]) -> None:
    workdir, summary = demo
    check_summary(summary, workdir, samples=20)
    assert sorted(p.name for p in (workdir / "model_repo").iterdir() if p.is_dir()) == sorted(
        [*MODELS, "digits_pipeline", "digits_preprocess"]
    )


def test_a_wrong_curl_output_name_fails_the_demo(demo: tuple[Path, dict]) -> None:
    """The demo's curl check on the real server: the output name the demo once sent (`logits`) is an error."""
    workdir, summary = demo
    image = summary["curl"]["image"]
    with TritonServer(workdir / "model_repo", explicit_models=["digits_onnx", "digits_pipeline"]) as server:
        for output in ("output", "logits"):
            script = curl_example(server.http_url, "digits_pipeline", str(workdir / image), output)
            answer = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
            if output == "output":
                assert curl_answer(answer, output, image, summary["curl"]["expected"]).passed
            else:
                with pytest.raises(DemoError, match="unexpected inference output 'logits'"):
                    curl_answer(answer, output, image, summary["curl"]["expected"])
    wrong = next(label for label in LABELS if label != summary["curl"]["label"])
    with pytest.raises(DemoError, match=f"classified .* as '{summary['curl']['label']}', it is a '{wrong}'"):
        curl_answer(summary["curl"]["answer"], "output", image, wrong)
