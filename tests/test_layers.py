"""Layers point one way: every `modelship.*` import in the product's modules, at module level or inside a
function, names a module of the same layer or a lower one. Walks the source files' syntax trees, so a lazy import
counts as much as a top-level one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> its package name (pyproject.toml's package-dir)
FOLDERS = {
    "modelship": "modelship",
    "preprocess": "modelship.preprocess",
    "checkpoint": "modelship.checkpoint",
    "parity": "modelship.parity",
    "export": "modelship.export",
    "serve": "modelship.serve",
    "benchmarks": "modelship.bench",
    "demo": "modelship.demo",
}
# bottom to top; a module belongs to the layer of its longest matching prefix
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("contract", ("modelship", "modelship.contract")),
    ("preprocess", ("modelship.preprocess",)),
    ("tasks", ("modelship.tasks",)),
    ("checkpoint", ("modelship.checkpoint",)),
    ("parity", ("modelship.parity",)),
    ("export", ("modelship.export",)),
    ("serve", ("modelship.serve",)),
    (
        "commands, benchmarks, demo, test support",
        ("modelship.cli", "modelship.bench", "modelship.demo", "modelship.testing"),
    ),
]


def layer_of(module: str) -> int:
    best, level = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), index
    assert level >= 0, f"{module} is in no layer"
    return level


def product_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "backends" in parts:  # copied into Triton's backend directory; imports no modelship module
                continue
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


def imported(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) of every modelship import, relative imports resolved."""
    found = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            found += [(node.lineno, base)]
    return [(line, name) for line, name in found if name == "modelship" or name.startswith("modelship.")]


MODULES = product_modules()


def test_every_module_is_in_a_layer() -> None:
    assert len(MODULES) > 50
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    own = layer_of(module)
    upward = [
        f"{MODULES[module].relative_to(ROOT)}:{line} imports {name} ({LAYERS[layer_of(name)][0]}) from the "
        f"{LAYERS[own][0]} layer"
        for line, name in imported(MODULES[module], module)
        if layer_of(name) > own
    ]
    assert not upward, "\n".join(upward)


def test_the_walk_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "lazy.py"
    source.write_text("def f():\n    from modelship.cli.main import main\n")
    assert imported(source, "modelship.contract.lazy") == [(2, "modelship.cli.main")]


def test_the_contract_has_no_import_circle() -> None:
    """Within the bottom layer every import, lazy or for type checkers only, points one way: no module needs one that
    needs it back (a circle hidden behind a function-level import, a bottom-of-file import or TYPE_CHECKING)."""
    contract = {name: path for name, path in MODULES.items() if layer_of(name) == 0}
    needs = {name: (_submodules_imported(path) & set(contract)) - {name} for name, path in contract.items()}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, " -> ".join([*visiting[visiting.index(name) :], name])
        visiting.append(name)
        for other in sorted(needs[name]):
            visit(other)
        visiting.pop()
        done.add(name)

    for name in sorted(contract):
        visit(name)


def _submodules_imported(path: Path) -> set[str]:
    """Every module `path` imports by absolute name, a `from package import module` counted as the module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found
