"""Bad input across inspect, export-model, parity and publish: one line naming the cause, a non-zero exit, exactly
one JSON object with --json, no traceback and nothing changed on disk (tests/cli_contract.py).

Each case is (id, build) where `build(ctx)` returns (args, names the error must contain). `ctx` holds a tiny
checkpoint, a verified export of it and scratch folders; cases needing a server live in test_bad_input_serving.py.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from serve_exports import write_export

from tests.checkpoint_factory import TinyNet, realistic, save_form
from tests.cli_contract import expect_failure, invoke

TINY = "tests.checkpoint_factory:make_tinynet"
IMAGE_INPUT = "x:batch,3,16,16"


@dataclass
class Ctx:
    root: Path  # everything a case may create goes under here
    ckpt: Path  # a good tiny checkpoint
    export: Path  # a verified export of it (onnx + torchscript, golden data)
    serve_export: Path  # an export with every artifact kind, as publish meets them
    scratch: Path  # a fresh folder per case

    def file(self, name: str, content: bytes | str) -> Path:
        path = self.scratch / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    def ckpt_with(self, name: str = "m.pt", form: str = "bare", **extra: Any) -> Path:
        return save_form(self.scratch / name, torch.load(self.ckpt), form, **extra)

    def export_copy(self, source: Path | None = None) -> Path:
        target = self.scratch / "export"
        shutil.copytree(source or self.export, target)
        return target

    def edit_manifest(self, folder: Path, edit: Callable[[dict], None]) -> Path:
        data = json.loads((folder / "manifest.json").read_text())
        edit(data)
        (folder / "manifest.json").write_text(json.dumps(data))
        return folder


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    root = tmp_path_factory.mktemp("bad")
    ckpt = save_form(root / "tiny.pt", realistic(TinyNet())[0].state_dict(), "bare")
    result = invoke(
        "export", ckpt, "--arch", TINY, "--onnx", "--torchscript", "--input", IMAGE_INPUT, "--out", root / "exports",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return root, ckpt, root / "exports" / "tiny", write_export(root / "serve" / "srv")


@pytest.fixture
def ctx(base, tmp_path) -> Ctx:
    root, ckpt, export, serve_export = base
    return Ctx(root, ckpt, export, serve_export, tmp_path)


def with_keymap(c: Ctx, text: str) -> list[Any]:
    """`inspect` of the good checkpoint with a key map file (map.json) holding `text`."""
    return ["inspect", c.ckpt, "--arch", TINY, "--key-map", c.file("map.json", text)]


Case = tuple[str, Callable[[Ctx], tuple[list[Any], list[str]]]]

INSPECT: list[Case] = [
    ("missing-file", lambda c: (["inspect", c.scratch / "nope.pt"], ["nope.pt", "no such file"])),
    ("folder", lambda c: (["inspect", c.scratch], ["not a file"])),
    ("empty-file", lambda c: (["inspect", c.file("e.pt", b"")], ["e.pt", "empty"])),
    ("random-bytes", lambda c: (["inspect", c.file("r.pt", bytes(range(256)) * 8)], ["not a PyTorch checkpoint"])),
    (
        "json-file",
        lambda c: (["inspect", c.file("j.pt", '{"arch": "resnet18"}')], ["not a PyTorch checkpoint", "JSON"]),
    ),
    ("text-file", lambda c: (["inspect", c.file("t.pt", "weights go here\n")], ["not a PyTorch checkpoint", "text"])),
    ("garbage-pickle", lambda c: (["inspect", c.file("p.pt", b"\x80\x02garbage")], ["p.pt", "corrupt"])),
    ("truncated-zip", lambda c: (["inspect", c.file("z.pt", c.ckpt.read_bytes()[:3000])], ["z.pt", "corrupt"])),
    ("foreign-zip", lambda c: (["inspect", _zip(c)], ["w.pt", "not a PyTorch checkpoint"])),
    (
        "nan-weights",
        lambda c: (["inspect", _nan(c), "--arch", TINY], ["NaN or Inf", "conv.weight"]),
    ),
    ("unknown-arch", lambda c: (["inspect", c.ckpt, "--arch", "resnet_18"], ["unknown architecture", "resnet18"])),
    ("unknown-timm-arch", lambda c: (["inspect", c.ckpt, "--arch", "timm/nope_net"], ["timm/nope_net"])),
    ("import-fails", lambda c: (["inspect", c.ckpt, "--arch", "no_such_pkg.mod:Net"], ["cannot import"])),
    ("import-no-attr", lambda c: (["inspect", c.ckpt, "--arch", "tests.checkpoint_factory:Nope"], ["no attribute"])),
    ("import-malformed", lambda c: (["inspect", c.ckpt, "--arch", "pkg:"], ["package.module:Factory"])),
    (
        "arch-kwargs-not-json",
        lambda c: (["inspect", c.ckpt, "--arch", TINY, "--arch-kwargs", "{num"], ["--arch-kwargs"]),
    ),
    ("arch-kwargs-list", lambda c: (["inspect", c.ckpt, "--arch", TINY, "--arch-kwargs", "[1]"], ["JSON object"])),
    (
        "arch-kwargs-unknown",
        lambda c: (["inspect", c.ckpt, "--arch", TINY, "--arch-kwargs", '{"nope": 1}'], ["could not build", "nope"]),
    ),
    ("keymap-missing", lambda c: (["inspect", c.ckpt, "--arch", TINY, "--key-map", c.scratch / "k.json"], ["k.json"])),
    ("keymap-not-json", lambda c: (with_keymap(c, "{"), ["not valid"])),
    (
        "keymap-unknown-field",
        lambda c: (with_keymap(c, '{"move": {}}'), ["unknown fields"]),
    ),
    (
        "keymap-bad-pattern",
        lambda c: (
            with_keymap(c, '{"regex": [{"pattern": "(", "replace": "x"}]}'),
            ["map.json"],
        ),
    ),
    (
        "keymap-bad-backreference",
        lambda c: (
            with_keymap(c, '{"regex": [{"pattern": "^fc_(\\\\d)", "replace": "fc\\\\9"}]}'),
            ["map.json", "invalid group reference"],
        ),
    ),
    (
        "keymap-unknown-group-name",
        lambda c: (
            with_keymap(c, '{"regex": [{"pattern": "a", "replace": "\\\\g<x>"}]}'),
            ["unknown group name"],
        ),
    ),
    (
        "keymap-rename-not-string",
        lambda c: (with_keymap(c, '{"rename": {"a": 1}}'), ["rename"]),
    ),
    (
        "keymap-drop-not-list",
        lambda c: (with_keymap(c, '{"drop": "fc.*"}'), ["drop"]),
    ),
    (
        "keymap-regex-not-objects",
        lambda c: (with_keymap(c, '{"regex": ["x"]}'), ["map.json"]),
    ),
    (
        "keymap-collision",
        lambda c: (
            with_keymap(c, '{"rename": {"fc1.bias": "fc2.bias"}}'),
            ["fc2.bias", "key-map"],
        ),
    ),
    (
        "state-key-missing",
        lambda c: (["inspect", c.ckpt, "--arch", TINY, "--state-key", "nope"], ["--state-key", "nope"]),
    ),
    (
        "state-key-not-tensors",
        lambda c: (["inspect", c.ckpt_with(form="training"), "--arch", TINY, "--state-key", "epoch"], ["epoch", "int"]),
    ),
    (
        "shape-mismatch",
        lambda c: (["inspect", c.ckpt, "--arch", TINY, "--arch-kwargs", '{"num_classes": 5}'], ["shape mismatch"]),
    ),
    (
        "missing-keys",
        lambda c: (["inspect", _without(c, "fc2."), "--arch", TINY], ["missing keys", "--allow-missing"]),
    ),
    (
        "unexpected-keys",
        lambda c: (["inspect", _extra(c), "--arch", TINY], ["unexpected keys", "--allow-unexpected"]),
    ),
    ("sidecar-not-json", lambda c: (["inspect", _sidecar(c, "{")], ["m.pt.json", "sidecar"])),
    ("sidecar-list", lambda c: (["inspect", _sidecar(c, "[1, 2]")], ["m.pt.json", "one JSON object"])),
    ("sidecar-arch-number", lambda c: (["inspect", _sidecar(c, '{"arch": 5}')], ["m.pt.json", "'arch'"])),
    ("sidecar-import-path", lambda c: (["inspect", _sidecar(c, '{"arch": "os:system"}')], ["m.pt.json", "os:system"])),
    (
        "sidecar-kwargs-not-object",
        lambda c: (["inspect", _sidecar(c, '{"arch": "resnet18", "arch_kwargs": [1]}')], ["'arch_kwargs'"]),
    ),
    (
        "sidecar-kwargs-download",
        lambda c: (
            ["inspect", _sidecar(c, '{"arch": "resnet18", "arch_kwargs": {"weights": "DEFAULT"}}')],
            ["weights"],
        ),
    ),
    (
        "metadata-io-invalid",
        lambda c: (["inspect", c.ckpt_with(io={"inputs": [{"shape": [1]}]}), "--arch", TINY], ["'io'"]),
    ),
    ("metadata-labels-dict", lambda c: (["inspect", c.ckpt_with(labels={"a": 1}), "--arch", TINY], ["labels"])),
    ("tensor-only", lambda c: (["inspect", _tensor(c), "--arch", TINY], ["Tensor", "state dict"])),
    ("no-weights", lambda c: (["inspect", _no_weights(c), "--arch", TINY], ["no weights", "--state-key"])),
    ("unknown-flag", lambda c: (["inspect", c.ckpt, "--bogus"], ["--bogus"])),
]


def _zip(c: Ctx) -> Path:
    path = c.scratch / "w.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "not torch")
    return path


def _nan(c: Ctx) -> Path:
    sd = torch.load(c.ckpt)
    sd["conv.weight"][0, 0, 0, 0] = float("nan")
    return save_form(c.scratch / "nan.pt", sd, "bare")


def _without(c: Ctx, prefix: str) -> Path:
    return save_form(
        c.scratch / "w.pt", {k: v for k, v in torch.load(c.ckpt).items() if not k.startswith(prefix)}, "bare"
    )


def _extra(c: Ctx) -> Path:
    return save_form(c.scratch / "x.pt", {**torch.load(c.ckpt), "aux.weight": torch.zeros(2)}, "bare")


def _sidecar(c: Ctx, text: str) -> Path:
    ckpt = c.ckpt_with()
    (c.scratch / "m.pt.json").write_text(text)
    return ckpt


def _tensor(c: Ctx) -> Path:
    path = c.scratch / "t.pt"
    torch.save(torch.zeros(3), path)
    return path


def _no_weights(c: Ctx) -> Path:
    path = c.scratch / "n.pt"
    torch.save({"epoch": 3, "stuff": {"a": 1}}, path)
    return path


def export(c: Ctx, *args: Any, ckpt: Path | None = None, spec: str = IMAGE_INPUT) -> list[Any]:
    return ["export", ckpt or c.ckpt, "--arch", TINY, "--input", spec, "--out", c.scratch / "out", *args]


EXPORT: list[Case] = [
    ("name-traversal", lambda c: (export(c, "--name", "../evil"), ["--name", "../evil", "not a safe folder name"])),
    ("name-nested", lambda c: (export(c, "--name", "a/b"), ["a/b", "not a safe folder name"])),
    ("name-hidden", lambda c: (export(c, "--name", ".hidden"), [".hidden"])),
    ("name-empty", lambda c: (export(c, "--name", ""), ["not a safe folder name"])),
    ("name-space", lambda c: (export(c, "--name", "my model"), ["my model"])),
    ("name-too-long", lambda c: (export(c, "--name", "x" * 200), ["at most 128"])),
    ("name-dotdot", lambda c: (export(c, "--name", "a..b"), ["a..b"])),
    ("stem-unsafe", lambda c: (export(c, ckpt=c.ckpt_with("my model.pt")), ["my model", "file stem"])),
    ("out-under-proc", lambda c: (["export", c.ckpt, "--arch", TINY, "--out", "/proc/modelship"], ["/proc"])),
    ("out-is-a-file", lambda c: ([*export(c)[:-2], "--out", c.file("f", "x") / "sub"], ["cannot write"])),
    (
        "exists-no-force",
        lambda c: (["export", c.ckpt, "--arch", TINY, "--out", c.export.parent], ["already exists", "--force"]),
    ),
    ("fp16-io-without-fp16", lambda c: (export(c, "--fp16-io"), ["--fp16-io needs --fp16"])),
    ("int8-cpu-unknown", lambda c: (export(c, "--int8-cpu", "arm"), ["--int8-cpu", "arm"])),
    ("preprocess-unknown-key", lambda c: (export(c, "--preprocess", "zoom=2"), ["zoom=2", "known key"])),
    ("preprocess-bad-size", lambda c: (export(c, "--preprocess", "resize=big"), ["resize='big'", "HxW"])),
    ("preprocess-missing-file", lambda c: (export(c, "--preprocess", c.scratch / "p.json"), ["p.json"])),
    ("preprocess-bad-inline-json", lambda c: (export(c, "--preprocess", '{"resize": 256'), ["not valid JSON"])),
    ("preprocess-inline-unknown", lambda c: (export(c, "--preprocess", '{"zoom": 2}'), ["zoom"])),
    (
        "preprocess-not-the-input-size",
        lambda c: (export(c, "--preprocess", "resize=72,crop=64"), ["64x64 images", "fixed at 16x16", "crop=16"]),
    ),
    ("batch-sizes-zero", lambda c: (export(c, "--batch-sizes", "0,2"), ["batch sizes must be from 1 to 4096"])),
    ("batch-sizes-words", lambda c: (export(c, "--batch-sizes", "a,b"), ["comma-separated integers"])),
    ("batch-sizes-same", lambda c: (export(c, "--batch-sizes", "2,2"), ["two different batch sizes"])),
    ("opset-low", lambda c: (export(c, "--opset", "5"), ["--opset 5"])),
    ("opset-high", lambda c: (export(c, "--opset", "99"), ["--opset 99"])),
    ("atol-negative", lambda c: (export(c, "--atol", "-1"), ["--atol", "a finite number from 0"])),
    ("fp16-rtol-negative", lambda c: (export(c, "--fp16-rtol", "-0.5"), ["--fp16-rtol"])),
    (
        "tolerances-file-nan",
        lambda c: (export(c, "--tolerances", c.file("t.json", '{"atol": NaN}')), ["atol", "finite number"]),
    ),
    ("input-no-dims", lambda c: (export(c, spec="x"), ["expected name:dims"])),
    ("input-dtype", lambda c: (export(c, spec="x:batch,3:float99"), ["unknown dtype"])),
    ("input-range", lambda c: (export(c, spec="x:batch,3:float32:1..a"), ["bad value range"])),
    ("input-dim", lambda c: (export(c, spec="x:batch,-3"), ["bad dimension"])),
    ("input-batch-not-first", lambda c: (export(c, spec="x:3,batch,16,16"), ["must be 'batch'"])),
    ("input-name", lambda c: (export(c, spec="x y:batch,3"), ["not a plain identifier"])),
    ("input-too-many", lambda c: (export(c, "--input", "y:batch,3"), ["2 inputs described"])),
    (
        "input-wrong-shape",
        lambda c: (export(c, spec="x:batch,5,16,16"), ["forward failed", "x[2, 5, 16, 16]"]),
    ),
    ("input-bfloat16", lambda c: (export(c, spec="x:batch,3,16,16:bfloat16"), ["bfloat16"])),
    ("dynamic-unknown", lambda c: (export(c, "--dynamic", "sequence"), ["--dynamic sequence"])),
    ("exporter-bogus", lambda c: (export(c, "--exporter", "magic"), ["magic"])),
    ("unknown-flag", lambda c: (export(c, "--bogus"), ["--bogus"])),
    ("checkpoint-missing", lambda c: (export(c, ckpt=c.scratch / "gone.pt"), ["gone.pt", "no such file"])),
    ("checkpoint-text", lambda c: (export(c, ckpt=c.file("t.pt", "hello")), ["not a PyTorch checkpoint"])),
    (
        "checkpoint-import-path",
        lambda c: (["export", _sidecar(c, '{"arch": "os:system"}'), "--out", c.scratch], ["os:system"]),
    ),
]


def parity(c: Ctx, *args: Any, folder: Path | None = None) -> list[Any]:
    report = c.scratch.parent / f"{c.scratch.name}-parity.json"  # the report is written on failure too: elsewhere
    return ["parity", folder or c.export_copy(), "--arch", TINY, "--report", report, *args]


def _tamper(c: Ctx) -> Path:
    folder = c.export_copy()
    with open(folder / "model.onnx", "ab") as handle:
        handle.write(b"\0")
    return folder


PARITY: list[Case] = [
    ("no-manifest", lambda c: (["parity", c.scratch], ["no manifest.json"])),
    ("export-missing", lambda c: (["parity", c.scratch / "nope"], ["nope"])),
    ("manifest-not-json", lambda c: (["parity", _manifest_text(c, "{")], ["not a valid modelship manifest"])),
    ("manifest-missing-fields", lambda c: (["parity", _manifest_text(c, "{}")], ["not a valid modelship manifest"])),
    ("artifact-unknown", lambda c: (parity(c, "--artifact", "onnx_int8"), ["no artifact 'onnx_int8'"])),
    ("artifact-file-missing", lambda c: (parity(c, folder=_remove(c, "model.onnx")), ["model.onnx is missing"])),
    (
        "tampered-golden",
        lambda c: (parity(c, "--against", "golden", folder=_tamper(c)), ["model.onnx changed since export"]),
    ),
    ("tampered-checkpoint", lambda c: (parity(c, folder=_tamper(c)), ["model.onnx changed since export"])),
    ("golden-missing", lambda c: (parity(c, "--against", "golden", folder=_remove(c, "golden.npz")), ["golden.npz"])),
    ("golden-corrupt", lambda c: (parity(c, "--against", "golden", folder=_corrupt_golden(c)), ["golden"])),
    ("images-with-golden", lambda c: (parity(c, "--against", "golden", "--images", c.scratch), ["--images needs"])),
    ("images-empty-folder", lambda c: (parity(c, "--images", _empty(c), "--preprocess", _spec(c)), ["no image files"])),
    (
        "images-not-folder",
        lambda c: (parity(c, "--images", c.scratch / "no", "--preprocess", _spec(c)), ["not a folder"]),
    ),
    ("images-no-spec", lambda c: (parity(c, "--images", c.scratch), ["no preprocessing spec", "--preprocess"])),
    (
        "preprocess-not-json",
        lambda c: (parity(c, "--images", c.scratch, "--preprocess", c.file("p.json", "{")), ["p.json"]),
    ),
    (
        "preprocess-unknown-field",
        lambda c: (parity(c, "--images", c.scratch, "--preprocess", c.file("q.json", '{"zoom": 2}')), ["zoom"]),
    ),
    ("tolerances-not-json", lambda c: (parity(c, "--tolerances", c.file("t.json", "[")), ["t.json"])),
    ("tolerances-unknown", lambda c: (parity(c, "--tolerances", c.file("u.json", '{"slack": 1}')), ["slack"])),
    ("atol-negative", lambda c: (parity(c, "--atol", "-1"), ["atol"])),
    ("checkpoint-other", lambda c: (parity(c, "--checkpoint", c.ckpt_with(form="training")), ["differs"])),
    ("checkpoint-moved", lambda c: (parity(c, folder=c.edit_manifest(c.export_copy(), _move_ckpt)), ["not found"])),
    ("manifest-import-path", lambda c: (["parity", c.export_copy()], ["source.arch", "--arch"])),
    ("served-unreachable", lambda c: (parity(c, "--served", "127.0.0.1:9"), ["cannot reach"])),
    ("served-bad-url", lambda c: (parity(c, "--served", "http://"), ["not a server address"])),
    ("batch-sizes-zero", lambda c: (parity(c, "--batch-sizes", "0"), ["batch sizes must be from 1 to 4096"])),
    ("unknown-flag", lambda c: (parity(c, "--bogus"), ["--bogus"])),
]


def _manifest_text(c: Ctx, text: str) -> Path:
    folder = c.export_copy()
    (folder / "manifest.json").write_text(text)
    return folder


def _remove(c: Ctx, name: str) -> Path:
    folder = c.export_copy()
    (folder / name).unlink()
    return folder


def _corrupt_golden(c: Ctx) -> Path:
    folder = c.export_copy()
    (folder / "golden.npz").write_bytes(b"PK\x03\x04 not really")
    return folder


def _spec(c: Ctx) -> Path:
    return c.file("spec.json", '{"resize": 16, "crop": 16}')


def _empty(c: Ctx) -> Path:
    (c.scratch / "empty").mkdir()
    return c.scratch / "empty"


def _move_ckpt(data: dict) -> None:
    data["source"]["checkpoint"] = "/nowhere/tiny.pt"


def publish(c: Ctx, *args: Any, folder: Path | None = None) -> list[Any]:
    return ["publish", folder or c.serve_export, "--repo", c.scratch / "repo", *args]


PUBLISH: list[Case] = [
    ("no-manifest", lambda c: (["publish", c.scratch, "--repo", c.scratch / "repo"], ["no manifest.json"])),
    ("name-traversal", lambda c: (publish(c, "--name", "../evil"), ["../evil", "not a safe folder name"])),
    ("name-nested", lambda c: (publish(c, "--name", "a/b"), ["a/b"])),
    ("version-zero", lambda c: (publish(c, "--version", "0"), ["--version", "a finite integer from 1"])),
    ("version-negative", lambda c: (publish(c, "--version", "-3"), ["-3"])),
    ("artifact-unknown", lambda c: (publish(c, "--artifact", "onnx_int8"), ["no artifact 'onnx_int8'"])),
    ("labels-count", lambda c: (publish(c, "--labels", c.file("l.txt", "cat\ndog\n")), ["2 labels", "5 classes"])),
    ("labels-empty", lambda c: (publish(c, "--labels", c.file("l.txt", "\n\n")), ["no labels"])),
    ("labels-binary", lambda c: (publish(c, "--labels", c.file("l.txt", b"\xff\xfe\x00")), ["l.txt", "cannot read"])),
    ("artifact-tampered", lambda c: (publish(c, folder=_tamper_serve(c)), ["does not match the manifest"])),
    ("artifact-missing", lambda c: (publish(c, folder=_remove_serve(c)), ["model.pt", "missing"])),
    ("kind-bogus", lambda c: (publish(c, "--kind", "tpu"), ["tpu"])),
    ("instances-zero", lambda c: (publish(c, "--instances", "0"), ["instances"])),
    ("max-batch-zero", lambda c: (publish(c, "--max-batch-size", "0"), ["--max-batch-size", "from 1"])),
    ("queue-delay-negative", lambda c: (publish(c, "--max-queue-delay-us", "-1"), ["--max-queue-delay-us", "from 0"])),
    ("keep-versions-negative", lambda c: (publish(c, "--keep-versions", "-1"), ["keep-versions"])),
    ("trt-without-gpu", lambda c: (publish(c, "--trt-fp16"), ["--trt-fp16 needs GPU"])),
    ("repo-under-proc", lambda c: (["publish", c.serve_export, "--repo", "/proc/modelship_repo"], ["/proc"])),
    ("repo-is-a-file", lambda c: (["publish", c.serve_export, "--repo", c.file("r", "x") / "repo"], ["cannot write"])),
    ("manifest-preprocess", lambda c: (publish(c, folder=_edit_serve(c, "preprocess", {"zoom": 1})), ["'preprocess'"])),
    ("manifest-labels", lambda c: (publish(c, folder=_edit_serve(c, "labels", {"a": 1})), ["'labels'"])),
    ("export-missing", lambda c: (["publish", c.scratch / "nope"], ["nope"])),
]


def _tamper_serve(c: Ctx) -> Path:
    folder = c.export_copy(c.serve_export)
    with open(folder / "model.pt", "ab") as handle:  # onnx artifacts are fine: all or nothing
        handle.write(b"\0")
    return folder


def _remove_serve(c: Ctx) -> Path:
    folder = c.export_copy(c.serve_export)
    (folder / "model.pt").unlink()
    return folder


def _edit_serve(c: Ctx, key: str, value: Any) -> Path:
    return c.edit_manifest(c.export_copy(c.serve_export), lambda data: data.update({key: value}))


CASES = [(f"{group}/{name}", build) for group, cases in (
    ("inspect", INSPECT), ("export", EXPORT), ("parity", PARITY), ("publish", PUBLISH)
) for name, build in cases]  # fmt: skip


@pytest.mark.parametrize(("name", "build"), CASES, ids=[name for name, _ in CASES])
def test_bad_input(ctx: Ctx, name: str, build) -> None:
    args, names = build(ctx)
    # publish may leave its lock file beside the repository; the repository itself must stay as it was (absent)
    scratch = ctx.scratch / "repo" if name.startswith("publish/") else ctx.scratch
    expect_failure(args, names=names, untouched=[scratch, ctx.root])


@pytest.mark.parametrize("version", ["0", "-3"])
def test_an_impossible_version_touches_nothing(ctx: Ctx, version: str) -> None:
    expect_failure(publish(ctx, "--version", version), names=["--version"], untouched=[ctx.scratch])
    assert not any(ctx.scratch.iterdir())  # no repository, no lock file, no staging folder
