"""The code the docs show works: every Python block of README.md and docs/*.md marked `<!-- runnable -->` runs in a
fresh interpreter in an empty folder; every other Python block parses, and every name it imports exists."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    code: str
    runnable: bool

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        if match.group(1) != "python":
            continue
        before = text[: match.start()].rstrip().splitlines()
        runnable = bool(before) and before[-1].strip() == MARK
        blocks.append(Block(path, text.count("\n", 0, match.start()) + 1, match.group(2), runnable))
    return blocks


BLOCKS = [block for path in DOCS for block in python_blocks(path)]
RUNNABLE = [block for block in BLOCKS if block.runnable]


def test_the_docs_have_runnable_blocks() -> None:
    assert {b.file.name for b in RUNNABLE} >= {"checkpoints.md", "parity.md", "preprocess.md"}


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_python_block_parses_and_imports_what_exists(block: Block) -> None:
    tree = ast.parse(block.code, filename=str(block))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"{block}: {node.module} has no {missing}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=str)
def test_runnable_blocks_run(block: Block, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{block} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
