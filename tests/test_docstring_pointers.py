"""Every dotted module path a docstring or comment names resolves: `serve.tune.search`, `modelship.export.plan`,
`contract.artifacts.register_artifact_format` are a module of the product, or a module and a name defined (or
imported) at its top level. A pointer to a module since renamed sends the next reader looking for code that is gone.
Paths are read relative to `modelship` (`export.plan` is `modelship.export.plan`), as the docstrings write them;
file names (`docs/export.md`, `cli/export.py`) are not module paths."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

from tests.test_layers import MODULES, ROOT

TOPS = ("contract", "export", "serve", "parity", "checkpoint", "preprocess", "tasks", "cli", "bench", "demo", "testing")
POINTER = re.compile(rf"(?<![\w./-])(?:modelship\.)?(?:{'|'.join(TOPS)})(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = (".py", ".md", ".json", ".txt", ".onnx", ".pt", ".toml", ".yaml", ".npz", ".pbtxt", ".safetensors")


def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring in `source`."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                found.append((node.body[0].lineno, docstring))
    return found


def pointers(text: str) -> list[str]:
    named = (match.group(0).rstrip(".") for match in POINTER.finditer(text))
    return [name for name in named if not name.endswith(FILE_SUFFIXES)]


@cache
def top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return frozenset(names)


def resolves(pointer: str, modules: dict[str, Path] = MODULES) -> bool:
    """A module of `modules`, or one and a name at its top level (what follows that name is not checked)."""
    parts = (pointer if pointer.startswith("modelship.") else f"modelship.{pointer}").split(".")
    for end in range(len(parts), 1, -1):
        module = ".".join(parts[:end])
        if module in modules:
            return end == len(parts) or parts[end] in top_level_names(modules[module])
    return False


def test_the_scan_reads_comments_and_docstrings() -> None:
    source = '"""See export.plan and serve.gone."""\n\n\ndef f():\n    """contract.nowhere.Thing"""\n    # parity.x\n'
    assert sorted(p for _, text in prose(source) for p in pointers(text)) == [
        "contract.nowhere.Thing",
        "export.plan",
        "parity.x",
        "serve.gone",
    ]
    assert pointers("docs/export.md, cli/export.py, export.py and modelship.export.plan.") == ["modelship.export.plan"]


def test_a_renamed_module_is_caught() -> None:
    assert resolves("export.plan") and resolves("modelship.export.plan")
    renamed = {name.replace("export.plan", "export.planning"): path for name, path in MODULES.items()}
    assert not resolves("export.plan", renamed)
    assert not resolves("export.int8_strategy") and not resolves("export.plan.no_such_name")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_pointer_resolves(module: str) -> None:
    path = MODULES[module]
    stale = [
        f"{path.relative_to(ROOT)}:{line}: {pointer}"
        for line, text in prose(path.read_text())
        for pointer in pointers(text)
        if not resolves(pointer)
    ]
    assert not stale, "\n".join(stale)
