"""What a published Python model carries is computed from its imports (serve.vendoring), and publish refuses a model
whose imports it did not vendor, naming the module. (That each of them loads and answers in a server started from
an empty folder, with modelship installed from its wheel: tests/test_installed_wheel.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from modelship.contract.errors import PublishError
from modelship.serve import vendoring
from modelship.serve.vendoring import check_vendored, needs, stage_python_model, template

TEMPLATES = sorted(p.stem for p in vendoring.TEMPLATES.glob("*.py"))
STAGED = [(name, module) for name in TEMPLATES for module in needs(template(name)).modules]


def test_every_template_is_staged_with_what_it_imports_and_checks_clean(tmp_path: Path) -> None:
    for name in TEMPLATES:
        version_dir = tmp_path / name / "1"
        stage_python_model(name, version_dir)  # checks it too
        copied = {
            ".".join(p.relative_to(version_dir).with_suffix("").parts).removesuffix(".__init__")
            for p in version_dir.rglob("*.py")
            if p.name != "model.py" and p.stat().st_size
        }
        assert copied == set(needs(template(name)).modules), name


def test_the_tokenizer_contract_brings_the_json_module_it_imports() -> None:
    """The defect that kept every text pipeline from loading outside the repository: contract.tokenizer imports
    a JSON module of the contract (then contract.jsonfile, now contract.json_object), which the hand-written list
    left out."""
    assert "modelship.contract.json_object" in needs(template("tokenize")).modules


def test_a_package_passed_through_runs_nothing_of_its_own(tmp_path: Path) -> None:
    """modelship.preprocess's own __init__ imports its builders (timm, torchvision configs): a preprocess model
    importing modelship.preprocess.image gets an empty __init__ on the way."""
    stage_python_model("preprocess", tmp_path / "1")
    assert (tmp_path / "1" / "modelship" / "preprocess" / "__init__.py").read_text() == ""
    assert not (tmp_path / "1" / "modelship" / "preprocess" / "builders.py").exists()


@pytest.mark.parametrize(("name", "module"), STAGED, ids=[f"{n}-{m}" for n, m in STAGED])
def test_a_module_left_out_is_refused_by_name(tmp_path: Path, name: str, module: str) -> None:
    version_dir = tmp_path / f"m{name}" / "1"
    stage_python_model(name, version_dir)
    vendored = version_dir.joinpath(*module.split("."))
    (vendored / "__init__.py" if vendored.is_dir() else vendored.with_suffix(".py")).unlink()
    with pytest.raises(PublishError, match=module.replace(".", r"\.")):
        check_vendored(version_dir)


def test_a_name_its_package_does_not_define_is_refused(tmp_path: Path) -> None:
    version_dir = tmp_path / "m" / "1"
    (version_dir / "modelship").mkdir(parents=True)
    (version_dir / "modelship" / "__init__.py").write_text("__version__ = '0'\n")
    (version_dir / "model.py").write_text("from modelship import __version__, missing\n")
    with pytest.raises(PublishError, match=r"modelship\.missing"):
        check_vendored(version_dir)


def test_an_import_no_triton_image_has_is_refused(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.py").write_text("import numpy\n\ndef f():\n    import torch\n")
    with pytest.raises(PublishError, match="imports torch, which no Triton image is known to have"):
        check_vendored(tmp_path / "1")


def test_imports_for_type_checkers_only_are_not_needed(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n    from modelship.cli import main\n"
        "import numpy\n"
    )
    found = needs(source)
    assert found.modules == () and found.imports == ("numpy",)


def test_publish_refuses_a_python_model_whose_module_was_not_vendored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vendoring that forgets a module (simulated: `needs` drops one) fails the publish, naming the module, and
    leaves the repository as it was."""
    from modelship.serve.publish import PublishOptions, publish_with
    from tests.serve_exports import write_export

    export = write_export(tmp_path / "tiny")
    real = vendoring.needs

    def forgetful(source: Path) -> vendoring.Needs:
        found = real(source)
        return vendoring.Needs(
            tuple(m for m in found.modules if m != "modelship.preprocess.resample"), found.packages, found.imports
        )

    monkeypatch.setattr(vendoring, "needs", forgetful)
    repo = tmp_path / "repo"
    with pytest.raises(PublishError, match=r"imports modelship\.preprocess\.resample"):
        publish_with(export, repo, PublishOptions())
    assert not repo.exists() or not any(p for p in repo.iterdir() if not p.name.startswith("."))


def test_the_local_backends_carry_the_helpers_they_import(tmp_path: Path) -> None:
    from modelship.serve.triton_install import BACKENDS_SOURCE, PYTHON_BACKEND_NAMES, backend_directory

    built = backend_directory(tmp_path)
    for backend in PYTHON_BACKEND_NAMES:
        tree = ast.parse((BACKENDS_SOURCE / backend / "model.py").read_text())
        local = {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.module.islower()
        } & {p.stem for p in BACKENDS_SOURCE.glob("*.py")}
        assert local and all((built / backend / f"{module}.py").is_file() for module in local)
