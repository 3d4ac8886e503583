"""`modelship parity-suite`: the parity suite CI runs (modelship.parity_tests, shipped in the wheel), run from an
installed modelship against a folder of your own checkpoints, and optionally the zoo of built-in architectures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from modelship.cli.main import GuardedCommand
from modelship.contract.errors import UsageError

SUITE = "modelship.parity_tests"
ZOOS = ("none", "fast", "full")


@click.command("parity-suite", cls=GuardedCommand, context_settings={"ignore_unknown_options": True})
@click.option(
    "--checkpoints",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Your checkpoints: DIR holds them and a checkpoints.toml giving each one's export-model arguments "
    "(docs/parity.md). Each is exported, and every artifact must pass `modelship parity`.",
)
@click.option(
    "--zoo",
    type=click.Choice(ZOOS),
    default="none",
    show_default=True,
    help="Also export and check the built-in architectures: fast (what CI runs, minutes) or full (every one).",
)
@click.option(
    "--reports",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("parity-reports"),
    show_default=True,
    help="Folder for every parity report (JSON).",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def parity_suite_command(checkpoints: Path | None, zoo: str, reports: Path, pytest_args: tuple[str, ...]) -> None:
    """Run the parity suite (pytest) against your own checkpoints from an installed modelship; exits with pytest's
    code. Needs the suite extra: pip install 'modelship[suite]'. Arguments after `--` go to pytest.

    \b
    Examples:
      modelship parity-suite --checkpoints ci-checkpoints
      modelship parity-suite --checkpoints ci-checkpoints --zoo fast -- -x -q
    """
    try:
        import pytest
    except ImportError:
        raise UsageError("the parity suite runs on pytest, which is not installed",
                         hint="pip install 'modelship[suite]'") from None  # fmt: skip
    if checkpoints is None and zoo == "none":
        raise UsageError("nothing to check", hint="give --checkpoints DIR, or --zoo fast/full")
    if checkpoints is not None and not (checkpoints / "checkpoints.toml").is_file():
        raise UsageError(f"--checkpoints {checkpoints}: no checkpoints.toml there", hint="see docs/parity.md")
    spec = importlib.util.find_spec(SUITE)
    assert spec is not None and spec.origin is not None, SUITE
    suite = str(Path(spec.origin).parent)  # a path, not --pyargs: pytest reads its conftest's options first
    args = [suite, "--zoo", zoo, "--parity-reports", str(reports.resolve()), "-p", "no:cacheprovider"]
    args += ["--checkpoints", str(checkpoints.resolve())] if checkpoints is not None else []
    raise SystemExit(pytest.main([*args, *pytest_args]))
