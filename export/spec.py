"""`ExportSpec`: what to export and how to verify it, validated when it is built (before anything is loaded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from modelship.checkpoint.families import family_of
from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject
from modelship.contract.names import check_name
from modelship.contract.opsets import DEFAULT_TRITON, OnnxExporter
from modelship.contract.precisions import get_precision, precision_names
from modelship.export.formats import default_formats as registered_defaults
from modelship.export.formats import export_format_flags, format_title
from modelship.export.io_resolve import InputOption, parse_input_option
from modelship.export.precision.registry import VariantOptions, formats_with
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
        return f"{format_title(self.format)} skipped: {self.why}; {self.ask}"

    def to_dict(self) -> dict[str, str]:
        return {"format": self.format, "why": self.why, "ask": self.ask}


@dataclass(frozen=True)
class FormatChoice:
    """The formats to export and those a plain `export-model` left out (and why)."""

    formats: tuple[str, ...]
    skipped: tuple[Skipped, ...] = ()


Options = TypeVar("Options", bound=VariantOptions)
UNSCRIPTABLE = Skipped("torchscript", "transformers models do not script", "--torchscript --trace exports it traced")


def default_formats(arch: str | None, trace: bool) -> FormatChoice:
    """What `export-model` writes when no format flag says: every default format, but ONNX alone for a transformers
    model (a Hugging Face folder) unless --trace, since transformers models hold their config and do not script.
    `arch` None: not known yet (the checkpoint is not loaded)."""
    defaults = registered_defaults()
    if arch is None or family_of(arch).scripts or trace:
        return FormatChoice(defaults)
    return FormatChoice(tuple(f for f in defaults if f != UNSCRIPTABLE.format), (UNSCRIPTABLE,))


@dataclass(frozen=True)
class ExportSpec:
    """What to export and how to verify it. `precisions`: the variants asked for besides fp32 (contract.precisions),
    written for every format in `formats` that has one, each with its precision's `options` (defaults unless given).
    `tolerances` holds ToleranceConfig overrides keyed by precision (`{"fp16": {"atol": 0.1}}`)."""

    out_dir: Path
    formats: tuple[str, ...] = field(default_factory=registered_defaults)
    precisions: tuple[str, ...] = ()
    options: tuple[VariantOptions, ...] = ()  # each precision's own options (export.precision.registry)
    require_variants: bool = False  # a variant asked for and declined fails the export (--require-variants)
    opset: int | None = None
    exporter: OnnxExporter | None = None  # None: what the task's models need (detectors: legacy), else dynamo
    trace: bool = False
    input_options: tuple[InputOption | str, ...] = ()  # --input values, parsed here: refused before any loading
    dynamic: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = (1, 7)
    tolerances: dict[str, JsonObject] = field(default_factory=dict)
    force: bool = False
    triton: str = DEFAULT_TRITON
    seed: int = 0
    task: str | None = None  # the task's name (modelship.tasks); None: the checkpoint's, else chosen from the model
    score_threshold: float | None = None  # a detector's own (run_export reads it off the model): the score edge

    def __post_init__(self) -> None:
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "formats", tuple(dict.fromkeys(self.formats or registered_defaults())))
        object.__setattr__(self, "precisions", tuple(dict.fromkeys(self.precisions)))
        parsed = tuple(parse_input_option(o) if isinstance(o, str) else o for o in self.input_options)
        object.__setattr__(self, "input_options", parsed)
        known = tuple(f.name for f in export_format_flags())
        unknown = sorted(set(self.formats) - set(known))
        if unknown:
            raise UsageError(f"unknown export format(s): {', '.join(unknown)}", hint=f"use {', '.join(known)}")
        if self.exporter is not None:
            if self.exporter not in set(OnnxExporter):
                choices = ", ".join(OnnxExporter)
                raise UsageError(f"unknown exporter {self.exporter!r}", hint=f"use one of {choices}")
            object.__setattr__(self, "exporter", OnnxExporter(self.exporter))
        self._check_precisions()
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
        for precision in precision_names():
            ToleranceConfig.for_precision(precision, self.tolerances)  # validate early

    def _check_precisions(self) -> None:
        """Each precision asked for is known and has a variant in a chosen format; their own options need them."""
        for name in self.precisions:
            precision = get_precision(name)
            if precision.flag is None:
                raise UsageError(f"{name} artifacts are always written", hint="ask for variants: fp16, int8")
            having = formats_with(name)
            if not set(having) & set(self.formats):
                titles = ", ".join(format_title(f) for f in having) or "no format"
                raise UsageError(
                    f"{precision.flag}: {', '.join(format_title(f) for f in self.formats)} has no {name} variant "
                    f"({name} is written for {titles})",
                    hint=" ".join(f"--{f}" for f in having) and f"add {' '.join(f'--{f}' for f in having)}",
                )
        for options in self.options:
            for flag in options.given():
                if options.precision not in self.precisions:
                    raise UsageError(f"{flag} needs --{options.precision}", hint=f"add --{options.precision}")

    def options_for(self, kind: type[Options]) -> Options:
        """The options of one precision (its class: Int8Options), its defaults when none were given."""
        return next((o for o in self.options if isinstance(o, kind)), None) or kind()

    def tolerance(self, precision: str) -> ToleranceConfig:
        """The tolerances of `precision` for the export's task, the overrides applied, a detector's score threshold
        as its score edge."""
        config = ToleranceConfig.for_precision(precision, self.tolerances, self.task)
        return config.with_score_edge(self.score_threshold)

    @property
    def name(self) -> str:
        return self.out_dir.name
