"""One name for each shared type, defined once and imported from where it is defined: `Tensors` (named arrays,
modelship.contract.tensors) is never spelled out again as `dict[str, np.ndarray]` nor aliased under another name,
and `JsonObject` (modelship.contract.json_object) is imported from that module only."""

from __future__ import annotations

import ast

import pytest

from tests.test_layers import MODULES, ROOT

DEFINED = {"Tensors": "modelship.contract.tensors", "JsonObject": "modelship.contract.json_object"}
SPELLED_OUT = {"dict[str, np.ndarray]": "Tensors", "dict[str, Any]": "JsonObject"}


def problems(module: str, source: str) -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                home = DEFINED.get(alias.name)
                if home is not None and node.module != home and module != home:
                    found.append(f"line {node.lineno}: {alias.name} imported from {node.module}, not {home}")
        elif isinstance(node, ast.Assign) and module not in DEFINED.values():
            value = ast.unparse(node.value)
            if value in SPELLED_OUT:
                names = ", ".join(ast.unparse(t) for t in node.targets)
                found.append(f"line {node.lineno}: {names} = {value} defines {SPELLED_OUT[value]} again")
    if module != DEFINED["Tensors"] and "dict[str, np.ndarray]" in source:
        found.append("spells out dict[str, np.ndarray]: use Tensors")
    return found


def test_the_check_sees_each_kind_of_problem() -> None:
    source = "from modelship.contract.jsonfile import JsonObject\nimport numpy as np\nArrays = dict[str, np.ndarray]\n"
    assert len(problems("modelship.serve.x", source)) == 3


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_shared_type_has_one_definition_and_one_import_path(module: str) -> None:
    found = problems(module, MODULES[module].read_text())
    assert not found, f"{MODULES[module].relative_to(ROOT)}: " + "; ".join(found)
