"""`ExportSpec`: what to export and how to verify it, validated when it is built (before anything is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship.checkpoint.hf_folder import ARCH_PREFIX as HF_ARCH_PREFIX
from modelship.contract.artifacts import DEFAULT_FORMATS
from modelship.contract.errors import UsageError
from modelship.contract.names import check_name
from modelship.contract.opsets import DEFAULT_TRITON
from modelship.export.io_resolve import InputOption, parse_input_option
from modelship.export.onnx_export import EXPORTERS
from modelship.parity.tolerance import ToleranceConfig
from modelship.tasks import get_task


@dataclass(frozen=True)
class Skipped:
    """A format a plain `export-model` (no format flag) leaves out for a kind of model: `why`, and `ask`, how to
    export it anyway."""

    format: str
    why: str
    ask: str

    def line(self) -> str:
        return f"{FORMAT_TITLES.get(self.format, self.format)} skipped: {self.why}; {self.ask}"

    def to_dict(self) -> dict[str, str]:
        return {"format": self.format, "why": self.why, "ask": self.ask}


@dataclass(frozen=True)
class FormatChoice:
    """The formats to export and those a plain `export-model` left out (and why)."""

    formats: tuple[str, ...]
    skipped: tuple[Skipped, ...] = ()


FORMAT_TITLES = {"torchscript": "TorchScript", "onnx": "ONNX"}
UNSCRIPTABLE = Skipped("torchscript", "transformers models do not script", "--torchscript --trace exports it traced")


def default_formats(arch: str | None, trace: bool) -> FormatChoice:
    """What `export-model` writes when no format flag says: every default format, but ONNX alone for a transformers
    model (a Hugging Face folder) unless --trace, since transformers models hold their config and do not script.
    `arch` None: not known yet (the checkpoint is not loaded)."""
    if arch is None or not arch.startswith(HF_ARCH_PREFIX) or trace:
        return FormatChoice(DEFAULT_FORMATS)
    return FormatChoice(tuple(f for f in DEFAULT_FORMATS if f != UNSCRIPTABLE.format), (UNSCRIPTABLE,))


@dataclass(frozen=True)
class ExportSpec:
    """What to export and how to verify it. `tolerances` holds ToleranceConfig overrides keyed by precision
    (`{"fp16": {"atol": 0.1}}`)."""

    out_dir: Path
    formats: tuple[str, ...] = DEFAULT_FORMATS
    fp16: bool = False
    fp16_io: bool = False
    fp16_keep: tuple[str, ...] = ()  # modules kept in fp32 in the fp16 variants (--fp16-keep)
    opset: int | None = None
    exporter: str | None = None  # None: what the task's models need (detectors: legacy), else dynamo
    trace: bool = False
    input_options: tuple[InputOption | str, ...] = ()  # --input values, parsed here: refused before any loading
    dynamic: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = (1, 7)
    tolerances: dict[str, dict[str, Any]] = field(default_factory=dict)
    force: bool = False
    triton: str = DEFAULT_TRITON
    seed: int = 0
    task: str | None = None  # the task's name (modelship.tasks); None: the checkpoint's, else chosen from the model
    score_threshold: float | None = None  # a detector's own (run_export reads it off the model): the score edge

    def __post_init__(self) -> None:
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "formats", tuple(dict.fromkeys(self.formats or DEFAULT_FORMATS)))
        parsed = tuple(parse_input_option(o) if isinstance(o, str) else o for o in self.input_options)
        object.__setattr__(self, "input_options", parsed)
        from modelship.export.formats import export_formats

        known = export_formats()
        unknown = sorted(set(self.formats) - set(known))
        if unknown:
            raise UsageError(f"unknown export format(s): {', '.join(unknown)}", hint=f"use {', '.join(known)}")
        if self.exporter is not None and self.exporter not in EXPORTERS:
            raise UsageError(f"unknown exporter {self.exporter!r}", hint=f"use one of {', '.join(EXPORTERS)}")
        if self.fp16_io and not self.fp16:
            raise UsageError("--fp16-io needs --fp16", hint="add --fp16")
        if not self.batch_sizes or any(b < 1 for b in self.batch_sizes):
            raise UsageError(f"batch sizes must be >= 1, got {self.batch_sizes}", hint="e.g. --batch-sizes 1,7")
        if len(set(self.batch_sizes)) < 2:
            raise UsageError(
                "verification needs two different batch sizes to prove the batch axis dynamic",
                hint="e.g. --batch-sizes 1,7",
            )
        check_name(self.name, "export name", UsageError)
        if self.task is not None:
            get_task(self.task)
        ToleranceConfig.for_precision("fp32", self.tolerances)  # validate early
        ToleranceConfig.for_precision("fp16", self.tolerances)

    def tolerance(self, precision: str) -> ToleranceConfig:
        """The tolerances of `precision`, the overrides applied, a detector's score threshold as its score edge."""
        return ToleranceConfig.for_precision(precision, self.tolerances).with_score_edge(self.score_threshold)

    @property
    def name(self) -> str:
        return self.out_dir.name
