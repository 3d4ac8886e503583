"""What `make demo` found, as data: accuracy per served model and protocol, the curl answer, each parity verdict.

Written to `exports/demo-summary.json` beside the exports whether the demo passed or not, so a test (or a person)
reads results instead of the demo's prose.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modelship.contract.errors import DemoError

SUMMARY_NAME = "demo-summary.json"


@dataclass(frozen=True)
class AccuracyRow:
    model: str
    protocol: str
    images: int
    accuracy: float
    predictions: list[int]


@dataclass(frozen=True)
class CurlAnswer:
    image: str
    output: str
    expected: str  # the digit's true label
    label: str  # the label the server ranked first
    answer: str  # the server's answer as curl printed it

    @property
    def passed(self) -> bool:
        return self.label == self.expected


@dataclass(frozen=True)
class ParityVerdict:
    candidate: str
    reference: str
    passed: bool
    batch_sizes: list[int]
    error: str | None


@dataclass
class DemoSummary:
    samples: int
    training_accuracy: float | None = None
    accuracy: list[AccuracyRow] = field(default_factory=list)
    curl: CurlAnswer | None = None
    parity: list[ParityVerdict] = field(default_factory=list)
    error: str | None = None  # why the demo stopped, when it did

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.curl is not None
            and self.curl.passed
            and bool(self.parity)
            and all(v.passed for v in self.parity)
        )

    def write(self, folder: Path) -> Path:
        path = folder / SUMMARY_NAME
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"ok": self.ok, **asdict(self)}, indent=2) + "\n")
        return path


def curl_answer(answer: str, output: str, image: str, expected: str) -> CurlAnswer:
    """The curl request's answer checked: Triton's JSON with `output` ranked by the classification extension
    (`score:index:label` first); a DemoError naming the cause when it is an error or the label is wrong."""
    try:
        data = json.loads(answer)
    except ValueError:
        raise DemoError(f"curl got no JSON answer from the server: {answer.strip()[:200]!r}") from None
    if "error" in data:
        raise DemoError(f"the server answered the curl request with an error: {data['error']}")
    ranked = next((o.get("data") or [] for o in data.get("outputs", []) if o.get("name") == output), [])
    if not ranked:
        raise DemoError(f"the server's answer has no ranked output {output!r}: {answer.strip()[:200]}")
    result = CurlAnswer(image, output, expected, str(ranked[0]).split(":", 2)[-1], answer.strip())
    if not result.passed:
        raise DemoError(f"curl classified {image} as {result.label!r}, it is a {expected!r}")
    return result
