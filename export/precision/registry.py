"""The precision variants of each format, one registration each (`register_variant`): an artifact of a format at a
precision other than fp32, built from the format's verified fp32 artifact. A variant owns what it needs:

- `file`: where it is written in the export folder (after its format's artifacts in the manifest's order);
- `start(build, written) -> Finish`: the export step that builds and verifies it;
- `options`: its precision's options, a `VariantOptions` dataclass whose fields carry their command-line flags
  (`OptionFlag`, in the field's metadata): export-model's flags and help are generated from them, and ExportSpec
  holds the values (`spec.options(Int8Options)`), naming no precision itself;
- `check(spec, preprocess, tokenizer)`: what it refuses before anything is exported;
- `explain(folder, artifact, model, io, inputs)`: how `--explain` localises it (None: as its format's fp32 artifact).

Its details class (the manifest's record) and its Triton config fragment (the details' `triton_parameters`) are
contract types, registered with `contract.artifact_details.register_variant_details`; its tolerances, flag and
pipeline rank are its precision's (contract.precisions). The built-in variants register themselves in
`export.precision.fp16` and `export.precision.int8`; a test adds one from inside the test
(tests/test_variant_registry.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from modelship.contract.artifacts import ARTIFACT_FORMATS, EXPORT_FILES
from modelship.contract.errors import ExportError
from modelship.contract.manifest import Declined
from modelship.contract.precisions import PRECISIONS, get_precision
from modelship.contract.registry import Registry

if TYPE_CHECKING:
    from modelship.export.build import Build, Finish, Written

FLAG = "flag"  # a VariantOptions field's metadata key: its OptionFlag


class FlagKind(StrEnum):
    """How a flag's value is read: a switch, a path, one of `choices`, or text given once per value."""

    SWITCH = "switch"
    PATH = "path"
    CHOICE = "choice"
    REPEATED = "repeated"


@dataclass(frozen=True)
class OptionFlag:
    """The command-line flag of one option: its name (`--calibrate`), kind, help, metavar and choices."""

    flag: str
    kind: FlagKind
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()


def flag(spec: OptionFlag) -> dict[str, OptionFlag]:
    """A VariantOptions field's metadata naming its flag: `field(default=..., metadata=flag(OptionFlag(...)))`."""
    return {FLAG: spec}


@dataclass(frozen=True)
class VariantOptions:
    """A precision's options (a subclass per precision, `precision` its name): each field's value when given, its
    flag in the field's metadata."""

    precision: ClassVar[str] = ""

    @classmethod
    def flags(cls) -> list[tuple[str, OptionFlag]]:
        """(field name, its flag) for every field that has one."""
        return [(f.name, f.metadata[FLAG]) for f in fields(cls) if FLAG in f.metadata]

    def given(self) -> list[str]:
        """The flags given a value other than their default."""
        return [
            flag.flag
            for f in fields(self)
            if FLAG in f.metadata
            for flag in [f.metadata[FLAG]]
            if f.default is not MISSING and getattr(self, f.name) != f.default
        ]


@dataclass(frozen=True)
class Variant:
    """One variant (see the module doc)."""

    format: str
    precision: str
    file: str
    start: Callable[[Build, Written], Finish]
    options: type[VariantOptions] | None = None
    check: Callable[..., None] | None = None
    explain: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        return f"{self.format}_{self.precision}"


VARIANTS: Registry[Variant] = Registry("variant")  # artifact name (onnx_fp16) -> its variant


def register_variant(variant: Variant, *, replace: bool = False) -> Variant:
    """Register `variant` and its file (`replace`: over one registered under its name)."""
    get_precision(variant.precision)
    VARIANTS.add(variant.name, variant, replace=replace)
    EXPORT_FILES.add(variant.name, variant.file, replace=replace)
    return variant


def unregister_variant(name: str) -> None:
    """Remove a variant and its file (a test's own)."""
    VARIANTS.pop(name)
    EXPORT_FILES.pop(name, None)


def variants_of(artifact_format: str, precisions: tuple[str, ...]) -> list[Variant]:
    """The variants of `artifact_format` at `precisions`, in the order the precisions were registered."""
    order = list(PRECISIONS)
    chosen = [v for v in VARIANTS.values() if v.format == artifact_format and v.precision in precisions]
    return sorted(chosen, key=lambda v: order.index(v.precision))


def formats_with(precision: str) -> tuple[str, ...]:
    """The formats that have a variant at `precision`."""
    return tuple(dict.fromkeys(v.format for v in VARIANTS.values() if v.precision == precision))


def artifact_order() -> list[str]:
    """Every artifact name, a format's variants right after its fp32 artifacts: the order of a manifest."""
    return [
        name
        for artifact_format, names in ARTIFACT_FORMATS.items()
        for name in (*names, *(v.name for v in VARIANTS.values() if v.format == artifact_format))
    ]


def options_classes() -> list[type[VariantOptions]]:
    """Each precision's options class once, in the order the precisions were registered."""
    found = {v.precision: v.options for v in VARIANTS.values() if v.options is not None}
    return [found[name] for name in PRECISIONS if name in found]


def refuse_declined(declined: list[Declined], required: bool) -> None:
    """With --require-variants, any variant declined (INT8 inaccurate or slower) fails the export, nothing written."""
    if declined and required:
        raise ExportError(
            "; ".join(d.reason for d in declined),
            hint="nothing was written (--require-variants); without it the verified artifacts are written and the "
            "declined variant left out",
            details={"declined": [d.to_dict() for d in declined]},
        )
