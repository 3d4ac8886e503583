"""Every numeric flag of `modelship tune` is refused before any work when it is NaN, infinite, out of range or huge:
one line naming the flag, exit 2, one JSON object with --json, no traceback (modelship.cli.numbers). Before, `--p99-ms
nan` measured for three minutes and `--server-cores 0` never ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelship.cli.numbers import Bounded
from tests.cli_contract import expect_failure

BAD = ("nan", "inf", "-inf", "0", "-1", "1e300", "ten")
FLAGS = ("--p99-ms", "--min-throughput", "--time-budget", "--max-concurrency", "--window", "--server-cores")


@pytest.mark.parametrize("flag", FLAGS)
@pytest.mark.parametrize("value", BAD)
def test_a_bad_number_is_refused_naming_the_flag_before_any_work(flag: str, value: str, tmp_path: Path) -> None:
    if flag == "--min-throughput" and value == "0":
        pytest.skip("no floor is a floor of 0")
    others = [] if flag == "--p99-ms" else ["--p99-ms", "100"]
    payload = expect_failure(
        ["tune", "model", "--repo", tmp_path, *others, flag, value], names=[flag, value], code=2, untouched=[tmp_path]
    )
    assert "Invalid value" in payload["error"]  # click's usage error: refused while parsing, before any work


def test_the_range_is_said_in_words() -> None:
    assert Bounded(0, 3_600_000).describe() == "a finite number above 0 and at most 3,600,000"
    assert Bounded(1, 1024, integer=True, low_closed=True).describe() == "a finite integer from 1 to 1,024"
    assert Bounded(1, 8, integer=True, low_closed=True).convert("4", None, None) == 4
