"""`modelship inspect`: human and --json output, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest
import torchvision
from click.testing import CliRunner

from modelship.cli.main import main
from tests.checkpoint_factory import make_tinynet, prefixed, realistic, save_form, signature_cache

pytestmark = pytest.mark.usefixtures(signature_cache.__name__)

JSON_FIELDS = {
    "ok",
    "arch",
    "arch_source",
    "arch_kwargs",
    "state_key",
    "renamed",
    "dropped",
    "missing_keys",
    "unexpected_keys",
    "shape_mismatches",
    "suggestions",
}


@pytest.fixture(scope="module")
def resnet_ckpt(tmp_path_factory):
    model = torchvision.models.resnet18(num_classes=10)
    return save_form(tmp_path_factory.mktemp("r") / "last.ckpt", model.state_dict(), "lightning")


def run(*args: str):
    return CliRunner().invoke(main, ["inspect", *map(str, args)])


def test_human_report(resnet_ckpt):
    result = run(resnet_ckpt)
    assert result.exit_code == 0, result.output
    for text in (
        "container",
        "hyper_parameters",
        "'state_dict'",
        "122 tensors",
        "resnet18",
        "fingerprint",
        "stripped wrapper prefix 'model.' from 122 keys",
        "OK",
    ):
        assert text in result.output


def test_json_success(resnet_ckpt):
    result = run(resnet_ckpt, "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) >= JSON_FIELDS and "error" not in data
    assert data["ok"] is True and data["arch_kwargs"] == {"num_classes": 10}
    assert data["renamed"]["model.fc.weight"] == "fc.weight"


def test_json_failure_mismatch(resnet_ckpt):
    result = run(resnet_ckpt, "--arch", "resnet18", "--arch-kwargs", '{"num_classes": 1000}', "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert set(data) >= JSON_FIELDS
    assert data["ok"] is False and "shape mismatches" in data["error"]
    assert [m["key"] for m in data["shape_mismatches"]] == ["fc.weight", "fc.bias"]


def test_human_failure_prints_report_and_one_error_line(tmp_path):
    sd = {k.replace("fc1.", "fc_1."): v for k, v in realistic(make_tinynet())[0].state_dict().items()}
    path = save_form(tmp_path / "t.pt", sd, "bare")
    result = run(path, "--arch", "tests.checkpoint_factory:make_tinynet")
    assert result.exit_code == 1
    assert "looks renamed: fc_1.weight, fc_1.bias -> fc1.weight, fc1.bias" in result.stdout
    assert "pattern = '^fc_1\\.'" in result.stdout
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["missing.pt"], 1, "no such file"),
        (["{ckpt}", "--arch", "resnet_18"], 1, "did you mean resnet18"),
        (["{ckpt}", "--arch", "resnet18", "--arch-kwargs", "{num_classes: 10}"], 2, "--arch-kwargs is not valid JSON"),
        (["{ckpt}", "--key-map", "nope.toml"], 2, "--key-map nope.toml: no such file"),
        (["{trunc}"], 1, "truncated"),
    ],
)
def test_user_errors_one_line(tmp_path, resnet_ckpt, args, code, needle):
    trunc = tmp_path / "trunc.pt"
    trunc.write_bytes(resnet_ckpt.read_bytes()[:1000])
    args = [a.replace("{ckpt}", str(resnet_ckpt)).replace("{trunc}", str(trunc)) for a in args]
    result = run(*args)
    assert result.exit_code == code
    assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    data = json.loads(run(*args, "--json").stdout)
    assert data["ok"] is False and needle in data["error"] and set(data) >= JSON_FIELDS


def test_json_is_the_only_stdout_even_with_progress(tmp_path):
    model = torchvision.models.resnet18()
    path = save_form(tmp_path / "ddp.pt", prefixed(model.state_dict(), "module."), "training")
    result = run(path, "--json")
    data = json.loads(result.stdout)
    assert data["ok"] and data["arch"] == "resnet18" and data["stripped_prefixes"] == {"module.": 122}
