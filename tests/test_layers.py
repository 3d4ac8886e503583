"""Layers point one way: every `modelship.*` import in the product's modules, at module level or inside a
function, names a module of the same layer or a lower one; and no module needs, through any chain of imports, one
that needs it back. Walks the source files' syntax trees, so a lazy import counts as much as a top-level one."""

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


def test_no_module_imports_itself_back() -> None:
    """No module of the product needs one that needs it back, through any chain of imports, at module level or
    inside a function (a circle closed by a lazy import is still a circle); imports for type checkers only
    (`if TYPE_CHECKING:`) are not run, so they do not count."""
    circle = find_circle(MODULES)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_walk_finds_a_circle(tmp_path: Path) -> None:
    """A circle closed inside a function, through `from package import module`, is found; one through a
    type checker's import is not."""
    (tmp_path / "pkg").mkdir()
    files = {
        "pkg": ("pkg/__init__.py", "from pkg import low\n"),
        "pkg.low": ("pkg/low.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import H\n"),
        "pkg.high": ("pkg/high.py", "from pkg import low\n"),
    }
    modules = {name: tmp_path / file for name, (file, _) in files.items()}
    for name, (_, text) in files.items():
        modules[name].write_text(text)
    assert find_circle(modules) is None
    modules["pkg.low"].write_text("def f():\n    from pkg import high\n")
    assert find_circle(modules) == ["pkg.low", "pkg.high", "pkg.low"]


def find_circle(modules: dict[str, Path]) -> list[str] | None:
    """The first chain of imports among `modules` that comes back to where it started (the circle, its first module
    repeated at its end), or None."""
    needs = {name: sorted(run_imports(path, name, modules) - {name}) for name, path in modules.items()}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> list[str] | None:
        if name in visiting:
            return [*visiting[visiting.index(name) :], name]
        if name in done:
            return None
        visiting.append(name)
        for other in needs[name]:
            circle = visit(other)
            if circle is not None:
                return circle
        visiting.pop()
        done.add(name)
        return None

    return next((circle for name in sorted(modules) if (circle := visit(name)) is not None), None)


def run_imports(path: Path, module: str, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that `path` imports when it runs (at module level or inside a function, relative
    imports resolved), leaving out `if TYPE_CHECKING:` blocks; `from package import name` counts as the submodule
    `package.name` when there is one, else as the package."""
    tree = ast.parse(path.read_text())
    unrun = {id(node) for block in ast.walk(tree) if _type_checking(block) for node in _within(block)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in unrun:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return found & set(modules)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _within(block: ast.AST) -> list[ast.AST]:
    """The nodes of an `if TYPE_CHECKING:` block's body (its `else:` runs)."""
    assert isinstance(block, ast.If)
    return [node for statement in block.body for node in ast.walk(statement)]
