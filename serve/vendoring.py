"""What a Python model modelship writes needs beside its model.py, computed from its imports, never listed by hand.

A published Python-backend model (`<name>_preprocess`, `_postprocess`, `_tokenize`) runs in Triton's Python stub,
wherever the server runs: the stock container has no modelship at all, and a local server started outside a checkout
has only an installed one. So its version folder carries a copy of every modelship module it imports, transitively
(`needs`): a module imported by name is copied as it is; a package only passed through on the way to one of its
modules gets an empty `__init__.py`, so importing it runs nothing else of it. Third-party imports are not copied:
the stock image has numpy, and `stock_image` says which others an operator adds (pip names in `PIP_NAMES`).

`check_vendored` reads a staged version folder back and refuses (PublishError naming the module and who imports
it) any modelship import that does not resolve inside it, and any third-party import modelship cannot name a package
for: publish runs it on every Python model before anything is committed.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modelship.contract.errors import PublishError

ROOT = "modelship"
TEMPLATES = Path(__file__).parent / "python_models"
# Third-party imports a Python model may have, by top-level module: what the stock Triton image's Python backend
# already has (None), or the pip requirement an operator adds.
PIP_NAMES: dict[str, str | None] = {
    "numpy": None,
    "triton_python_backend_utils": None,  # the Python backend's own module
    "PIL": "pillow>=10",
    "tokenizers": "tokenizers>=0.20",
}


@dataclass(frozen=True)
class Needs:
    """A Python model's `modules` (the modelship modules copied beside model.py, dotted, sorted; `packages`: those of
    them that are packages, copied as their own `__init__.py`) and the third-party top-level modules it imports
    (`imports`)."""

    modules: tuple[str, ...]
    packages: tuple[str, ...]
    imports: tuple[str, ...]

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pip requirements the stock image lacks for these imports."""
        return tuple(p for name in self.imports if (p := PIP_NAMES.get(name)) is not None)


@dataclass(frozen=True)
class _Import:
    """One import statement's module (`module`) and, for `from module import a, b`, the names it takes."""

    module: str
    names: tuple[str, ...] = ()


def template(name: str) -> Path:
    """serve/python_models/<name>.py."""
    return TEMPLATES / f"{name}.py"


def needs(source: Path) -> Needs:
    """What the Python file `source` imports, transitively through the modelship modules it imports."""
    modules: set[str] = set()
    third_party: set[str] = set()
    pending = [source]
    while pending:
        for found in imports_of(pending.pop()):
            top = found.module.split(".")[0]
            if top != ROOT:
                if top not in sys.stdlib_module_names:
                    third_party.add(top)
                continue
            for module in _modelship_modules(found):
                if module not in modules:
                    modules.add(module)
                    pending.append(_origin(module))
    packages = tuple(m for m in sorted(modules) if _origin(m).name == "__init__.py")
    return Needs(tuple(sorted(modules)), packages, tuple(sorted(third_party)))


def local_modules(source: Path, folders: Sequence[Path]) -> tuple[Path, ...]:
    """The files in `folders` that `source` imports as top-level modules, transitively (a local backend's model.py
    and the helpers the backends share)."""
    found: dict[Path, None] = {}
    pending = [source]
    while pending:
        for imported in imports_of(pending.pop()):
            for path in (folder / f"{imported.module}.py" for folder in folders):
                if path.is_file() and path not in found:
                    found[path] = None
                    pending.append(path)
    return tuple(found)


def stage_python_model(name: str, version_dir: Path) -> None:
    """A Python-backend model's version folder: template `name` as model.py and the modelship modules it needs,
    checked as publish checks every Python model (check_vendored)."""
    version_dir.mkdir(parents=True)
    shutil.copy2(template(name), version_dir / "model.py")
    found = needs(template(name))
    for module in found.modules:  # parents first: a package copied whole replaces the empty __init__.py
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = version_dir.joinpath(*parts[:depth])
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
        target = _vendored_path(version_dir, module, module in found.packages)
        target.parent.mkdir(exist_ok=True)
        shutil.copy2(_origin(module), target)
    check_vendored(version_dir)


def check_vendored(version_dir: Path) -> None:
    """PublishError unless every modelship import of every Python file in `version_dir` resolves to a file inside
    it, and every third-party import is one the server can have (PIP_NAMES)."""
    for path in sorted(version_dir.rglob("*.py")):
        where = path.relative_to(version_dir)
        for found in imports_of(path):
            top = found.module.split(".")[0]
            if top == ROOT:
                missing = _unresolved(version_dir, found)
                if missing:
                    raise PublishError(
                        f"{version_dir.parent.name}: {where} imports {missing}, which publish did not copy into "
                        f"{version_dir.name}/",
                        hint="report this: the published model would fail to load wherever modelship is not "
                        "importable (the stock Triton container)",
                    )
            elif top not in sys.stdlib_module_names and top not in PIP_NAMES:
                raise PublishError(
                    f"{version_dir.parent.name}: {where} imports {top}, which no Triton image is known to have",
                    hint=f"Python models may import the standard library, modelship and {', '.join(PIP_NAMES)}",
                )


def imports_of(source: Path) -> list[_Import]:
    """Every absolute import in `source` (module level and inside functions), except those under `if
    TYPE_CHECKING:`; a relative import is refused (a vendored copy must import as the package does)."""
    tree = ast.parse(source.read_text(), str(source))
    found: list[_Import] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.extend(_Import(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module is None:
                raise PublishError(f"{source}: a relative import ({ast.unparse(node)}) cannot be vendored")
            found.append(_Import(node.module, tuple(alias.name for alias in node.names)))
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree`, leaving out the bodies of `if TYPE_CHECKING:` blocks."""
    nodes: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return nodes


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _modelship_modules(found: _Import) -> list[str]:
    """The modelship modules one import needs run: the module it names, except a package it only passes through
    (`from package import submodule`), and each submodule it imports by name."""
    spec = importlib.util.find_spec(found.module)
    if spec is None:
        raise PublishError(f"modelship module {found.module} is not installed", hint="reinstall modelship")
    if not found.names or spec.submodule_search_locations is None:
        return [found.module]
    submodules = [f"{found.module}.{n}" for n in found.names if _exists(f"{found.module}.{n}")]
    return ([found.module] if len(submodules) < len(found.names) else []) + submodules


def _exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _origin(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return Path(spec.origin)


def _vendored_path(version_dir: Path, module: str, package: bool) -> Path:
    parts = module.split(".")
    return version_dir.joinpath(*parts, "__init__.py") if package else version_dir.joinpath(*parts).with_suffix(".py")


def _unresolved(version_dir: Path, found: _Import) -> str | None:
    """The first module of `found` missing from `version_dir` (or a name its package does not define), else None."""
    parts = found.module.split(".")
    for depth in range(1, len(parts) + 1):
        if not _resolves(version_dir, parts[:depth]):
            return ".".join(parts[:depth])
    base = version_dir.joinpath(*parts)
    if base.is_dir():
        defined = _top_level_names(base / "__init__.py")
        for name in found.names:
            if not _resolves(version_dir, [*parts, name]) and name not in defined:
                return f"{found.module}.{name}"
    return None


def _resolves(version_dir: Path, parts: list[str]) -> bool:
    path = version_dir.joinpath(*parts)
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file()


def _top_level_names(init: Path) -> set[str]:
    """The names a package's `__init__.py` binds at module level (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names
