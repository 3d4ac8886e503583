"""Every numeric flag of every command, found by walking the commands: NaN, inf, 0, a negative and a huge value are
either a value the flag's type accepts by its own stated range, or refused while parsing, in one line naming the
flag, exit 2, with nothing run (no traceback, no hang; with --json one object with ok false)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from modelship.cli.main import COMMANDS
from modelship.cli.numbers import Bounded

VALUES = ("nan", "inf", "-inf", "0", "-1", "1e30", "99999999999999999999")
NUMERIC = (click.types.IntParamType, click.types.FloatParamType)  # click's own, FloatRange and IntRange included


def commands() -> Iterator[tuple[str, click.Command]]:
    """Every command of `modelship` (`export-model` is `modelship export`)."""
    for name, (target, _) in COMMANDS.items():
        module, attribute = target.split(":")
        yield from _leaves(name, getattr(importlib.import_module(module), attribute))


def _leaves(path: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaves(f"{path} {name}", sub)
    else:
        yield path, command


def numeric_flags() -> list[tuple[str, click.Command, click.Option]]:
    return [
        (path, command, option)
        for path, command in commands()
        for option in command.params
        if isinstance(option, click.Option) and isinstance(option.type, (Bounded, *NUMERIC))
    ]


FLAGS = numeric_flags()


def test_the_walk_finds_every_commands_numbers() -> None:
    found = {(path, option.opts[0]) for path, _, option in FLAGS}
    assert {("tune", "--p99-ms"), ("serve", "--http-port"), ("publish", "--max-batch-size")} <= found
    assert {("rollout", "--timeout"), ("deploy kserve", "--gpus"), ("infer", "--min-score")} <= found
    assert len(found) > 30


@pytest.mark.parametrize(("path", "command", "option"), FLAGS, ids=[f"{p} {o.opts[0]}" for p, _, o in FLAGS])
def test_every_numeric_flag_has_a_finite_range(path: str, command: click.Command, option: click.Option) -> None:
    """click's int, float, FloatRange and IntRange accept NaN or unbounded values; every flag uses cli.numbers."""
    assert isinstance(option.type, Bounded), f"{path} {option.opts[0]}: type={option.type!r}, use cli/numbers.py"


@pytest.mark.parametrize(("path", "command", "option"), FLAGS, ids=[f"{p} {o.opts[0]}" for p, _, o in FLAGS])
def test_bad_numbers_are_refused_in_one_line(path: str, command: click.Command, option: click.Option) -> None:
    bounded = option.type
    assert isinstance(bounded, Bounded)
    refused = [value for value in VALUES if not _accepts(bounded, value)]
    assert {"nan", "inf", "-inf", "1e30", "99999999999999999999"} <= set(refused), bounded.describe()
    flag = option.opts[0]
    takes_json = any(p.name == "as_json" for p in command.params)
    for value in refused:
        for as_json in (False, True) if takes_json else (False,):
            args = [flag, value, *(["--json"] if as_json else [])]
            result = CliRunner().invoke(command, args, prog_name=path)
            assert result.exit_code == 2, (path, args, result.output)
            assert isinstance(result.exception, SystemExit), (path, args, result.exception)
            if as_json:
                payload = json.loads(result.stdout)
                assert payload["ok"] is False and flag in payload["error"], payload
            else:
                lines = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
                assert len(lines) == 1 and flag in lines[0], result.stderr


def _accepts(bounded: Bounded, value: str) -> bool:
    try:
        bounded.convert(value, None, None)
    except click.BadParameter:
        return False
    return True


@pytest.mark.parametrize(
    ("low", "high", "integer", "closed", "good", "bad"),
    [
        (0, 10, False, False, ["0.5", "10"], ["0", "-1", "nan", "inf", "10.5", "x"]),
        (0, 10, False, True, ["0", "10"], ["-0.1", "nan"]),
        (1, 5, True, True, ["1", "5", "3.0"], ["0", "2.5", "6", "nan", "1e30"]),
    ],
)
def test_bounded(low: int, high: int, integer: bool, closed: bool, good: list[str], bad: list[str]) -> None:
    bounded = Bounded(low, high, integer=integer, low_closed=closed)
    assert all(_accepts(bounded, v) for v in good)
    assert not any(_accepts(bounded, v) for v in bad)
