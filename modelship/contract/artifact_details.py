"""What an artifact's exporter recorded about it, typed per format and tagged with it in manifest.json.

Every format's details share the size, the step times and, for fp16 variants, what stayed in fp32; each format adds
its own (`TorchScriptDetails`, `OnnxDetails`, `Pt2Details`, `AotiDetails`). `DETAIL_TYPES` maps an artifact format
to its class, so a manifest reads back typed; a new format registers its class with `register_details`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import ClassVar, Self, TypeVar

from modelship.contract.cpu_kinds import PARAM_INT8_CPU, CpuKind
from modelship.contract.json_object import JsonObject
from modelship.contract.registry import Registry


@dataclass(frozen=True)
class KeptModule:
    """A module an fp16 TorchScript artifact keeps in fp32, and why (its own half computation diverges)."""

    module: str
    reason: str


@dataclass(frozen=True)
class KeptNode:
    """An ONNX node an fp16 artifact keeps in fp32 and why (the tensor it writes or reads, and that tensor's range)."""

    node: str
    op: str
    module: str
    reason: str


@dataclass(frozen=True)
class Fp16Run:
    """The verdict of one run of an fp16 conversion attempt (ONNX Runtime on this CPU)."""

    passed: bool
    failures: list[str]


@dataclass(frozen=True)
class Fp16Attempt:
    """One fp16 conversion tried: the ops kept in fp32, why, its verdict, and ONNX Runtime's CPU run of it."""

    kept_fp32: list[str]
    reason: str
    passed: bool
    failures: list[str]
    cpu_run: Fp16Run | None = None

    @classmethod
    def from_dict(cls, data: JsonObject) -> Fp16Attempt:
        run = data.get("cpu_run")
        return cls(
            list(data.get("kept_fp32") or []),
            str(data.get("reason", "")),
            bool(data.get("passed")),
            list(data.get("failures") or []),
            Fp16Run(bool(run["passed"]), list(run.get("failures") or [])) if run else None,
        )


@dataclass
class ArtifactDetails:
    """What every format records: the file's size, seconds per step (script, export, convert, verify), and for an
    fp16 variant whether it takes and returns float16 and the modules asked to stay in fp32 (--fp16-keep, plus
    those ONNX's bisection found)."""

    format: ClassVar[str] = ""
    bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    fp16_io: bool = False
    fp16_keep: list[str] = field(default_factory=list)

    def kept_in_fp32(self) -> dict[str, list[str]]:
        """Module -> the ops kept in fp32 in it (empty: the whole module), for the export's summary."""
        return {module: [] for module in self.fp16_keep}

    def kept_reason(self) -> str | None:
        """Why the first kept part was kept, when the export found it itself."""
        return None

    def lines(self) -> list[str]:
        """What the export's summary says of this artifact beyond its parity row (none by default)."""
        return []

    def warnings(self) -> list[str]:
        """What a user must read of it even when the variant was declined (none by default)."""
        return []

    def triton_parameters(self) -> dict[str, str]:
        """What its published Triton config notes about it, as config parameters (none by default)."""
        return {}

    def to_dict(self) -> JsonObject:
        return {"format": self.format, **asdict(self)}

    @classmethod
    def from_dict(cls, data: JsonObject) -> Self:
        """The details as `to_dict` wrote them; keys this version does not know are left out."""
        known = {f.name for f in fields(cls)}
        return cls(**cls._typed({k: v for k, v in data.items() if k in known}))

    @classmethod
    def _typed(cls, values: JsonObject) -> JsonObject:
        return values


D = TypeVar("D", bound=type[ArtifactDetails])
DETAIL_TYPES: Registry[type[ArtifactDetails]] = Registry("artifact details type")


def register_details(cls: D) -> D:
    """Class decorator: the details of artifacts of format `cls.format` are `cls`."""
    DETAIL_TYPES.add(cls.format, cls)
    return cls


VARIANT_DETAILS: Registry[type[ArtifactDetails]] = Registry("variant details type")  # artifact name -> its class


def register_variant_details(artifact: str) -> Callable[[D], D]:
    """Class decorator: the details of the artifact named `artifact` (a variant, e.g. onnx_int8) are `cls`,
    whatever its format's class."""

    def register(cls: D) -> D:
        VARIANT_DETAILS.add(artifact, cls)
        return cls

    return register


def details_for(artifact_format: str, data: JsonObject | None = None, artifact: str = "") -> ArtifactDetails:
    """The details of an artifact of `artifact_format` (named `artifact`: a variant may have its own class), read
    from `data` (empty: the defaults)."""
    cls = VARIANT_DETAILS.get(artifact) or DETAIL_TYPES.get(artifact_format, ArtifactDetails)
    return cls.from_dict(dict(data or {}))


class TorchScriptMethod(StrEnum):
    """How a TorchScript artifact was made."""

    SCRIPT = "script"  # torch.jit.script: control flow kept
    TRACE = "trace"  # torch.jit.trace: one path, recorded on the example inputs


@register_details
@dataclass
class TorchScriptDetails(ArtifactDetails):
    """`method`: script or trace; `tracer_warnings`: what torch.jit.trace said; `kept_fp32_modules`: the modules an
    fp16 variant keeps in fp32 because their half computation diverged."""

    format: ClassVar[str] = "torchscript"
    method: TorchScriptMethod = TorchScriptMethod.SCRIPT
    tracer_warnings: list[str] = field(default_factory=list)
    kept_fp32_modules: list[KeptModule] = field(default_factory=list)

    def kept_in_fp32(self) -> dict[str, list[str]]:
        return {kept.module: [] for kept in self.kept_fp32_modules} | super().kept_in_fp32()

    def kept_reason(self) -> str | None:
        return self.kept_fp32_modules[0].reason if self.kept_fp32_modules else None

    @classmethod
    def _typed(cls, values: JsonObject) -> JsonObject:
        return values | {
            "method": TorchScriptMethod(values.get("method") or TorchScriptMethod.SCRIPT),
            "kept_fp32_modules": [KeptModule(**k) for k in values.get("kept_fp32_modules") or []],
        }


@register_details
@dataclass
class OnnxDetails(ArtifactDetails):
    """The exporter and opset, the IR version written (and the one the exporter stamped), node count, whether the
    weights are external data; for an fp16 variant the ops and nodes kept in fp32, every conversion attempt and how
    its verdict was reached."""

    format: ClassVar[str] = "onnx"
    exporter: str = ""
    opset: int | None = None
    ir_version: int | None = None
    exported_ir_version: int | None = None
    nodes: int = 0
    external_data: bool = False
    kept_fp32_ops: list[str] = field(default_factory=list)
    kept_fp32_nodes: list[KeptNode] = field(default_factory=list)
    fp16_verdict: str = ""
    fp16_attempts: list[Fp16Attempt] = field(default_factory=list)

    def kept_in_fp32(self) -> dict[str, list[str]]:
        modules: dict[str, list[str]] = {}
        for node in self.kept_fp32_nodes:
            modules.setdefault(node.module or "(top level)", []).append(node.op)
        return modules | {m: modules.get(m, []) for m in self.fp16_keep}

    def kept_reason(self) -> str | None:
        return self.kept_fp32_nodes[0].reason if self.kept_fp32_nodes else None

    @classmethod
    def _typed(cls, values: JsonObject) -> JsonObject:
        return values | {
            "kept_fp32_nodes": [KeptNode(**k) for k in values.get("kept_fp32_nodes") or []],
            "fp16_attempts": [Fp16Attempt.from_dict(a) for a in values.get("fp16_attempts") or []],
        }


# ONNX Runtime 1.31 segfaults creating a CPU session for some fp16 graphs (vit_b_16) unless this optimizer is off:
# every fp16 session (parity, and the serving backend through the published config) disables it.
FP16_DISABLED_OPTIMIZERS = ("NchwcTransformer",)


@register_variant_details("onnx_fp16")
@dataclass
class OnnxFp16Details(OnnxDetails):
    """An fp16 ONNX variant: its Triton config turns off the optimizer ONNX Runtime crashes on for fp16 graphs."""

    def triton_parameters(self) -> dict[str, str]:
        return {"disabled_optimizers": ",".join(FP16_DISABLED_OPTIMIZERS)}


@register_details
@dataclass
class Pt2Details(ArtifactDetails):
    """torch.export's ExportedProgram: nothing beyond the common details."""

    format: ClassVar[str] = "pt2"


@register_details
@dataclass
class AotiDetails(ArtifactDetails):
    """An AOTInductor package: the compiler that built it."""

    format: ClassVar[str] = "aoti"
    compiler: str = "AOTInductor"


@dataclass(frozen=True)
class Int8Try:
    """One INT8 quantization tried: its recipe, whether it passed on the held-back inputs, and why not: the first
    failures, on how many input sets, the lowest top-1 agreement of a classifier's output with its 95% interval
    over the `judged` held-back inputs (contract.confidence) and the lowest cosine of an output (how close it came,
    when it has them); its speed against fp32 at the largest verified batch (`speedup`: with the agreement, the
    try's point on the accuracy-speed plane); the nodes it kept float; `raised`: ONNX Runtime's quantizer failed on
    it (its failure says why)."""

    recipe: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    failing_sets: int = 0
    cosine: float | None = None
    top1_agreement: float | None = None
    raised: bool = False
    judged: int = 0
    interval: tuple[float, float] | None = None
    speedup: float | None = None
    kept_float: list[str] = field(default_factory=list)

    def accuracy(self) -> float | None:
        """What the try is judged closest by: top-1 agreement where it has one, else the cosine."""
        return self.top1_agreement if self.top1_agreement is not None else self.cosine

    def point(self) -> str:
        """The try on the accuracy-speed plane, e.g. `top-1 0.917 (0.74-0.98), 2.35x fp32`."""
        parts = []
        if self.top1_agreement is not None:
            shown = f" ({self.interval[0]:.2f}-{self.interval[1]:.2f})" if self.interval else ""
            parts.append(f"top-1 {self.top1_agreement:.3f}{shown}")
        elif self.cosine is not None:
            parts.append(f"cosine {self.cosine:.4f}")
        if self.speedup:
            parts.append(f"{self.speedup:.2f}x fp32")
        return ", ".join(parts) or ("the quantizer failed" if self.raised else "no figures")

    def closeness(self) -> tuple[bool, int, float, float]:
        """Sorts the closest try first: passing, then fewest failing sets, then the answers a user sees (top-1
        agreement), then the cosine."""
        agreement = self.top1_agreement if self.top1_agreement is not None else 1.0
        return (not self.passed, self.failing_sets, -agreement, -(self.cosine if self.cosine is not None else -1.0))


@register_variant_details("onnx_int8")
@dataclass
class Int8Details(OnnxDetails):
    """An INT8 ONNX variant: the recipe that shipped, the calibration data and how it was split, the nodes kept
    float, the speed against fp32 measured during the export (`speedups`: fp32 time / INT8 time by batch), every
    quantization tried, the choices made and why, and the golden file of the held-back inputs it was judged on."""

    recipe: str = ""
    calibration: str = ""
    calibration_inputs: int = 0
    judged_inputs: int = 0
    kept_float: list[str] = field(default_factory=list)
    speedups: dict[str, float] = field(default_factory=dict)
    tries: list[Int8Try] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    golden: str = ""
    target_cpu: str = ""  # contract.cpu_kinds.CpuKind: where the export was told it will be served
    judged_on: str = ""  # the CpuKind of the CPU it was judged and timed on
    full_range_weights: bool = False  # weights in all 8 bits (else 7: they never saturate)
    quantized_ops: list[str] = field(default_factory=list)  # the op types the recipe quantized
    qdq_pairs_left: int | None = None  # Q/DQ pairs ONNX Runtime's CPU optimisations could not fuse
    integer_ops: int | None = None  # integer operators in the graph ONNX Runtime runs
    confidence: str = ""  # one line when the held-back inputs are too few to resolve the bar (contract.confidence)

    def lines(self) -> list[str]:
        speed = ", ".join(f"{ratio:.2f}x fp32 at {batch}" for batch, ratio in self.speedups.items())
        lines = [f"{self.recipe}; {speed} (ONNX Runtime, this CPU)", f"calibration {self.calibration}"]
        if self.qdq_pairs_left is not None:
            lines.append(
                f"as ONNX Runtime runs it: {self.integer_ops} integer ops, {self.qdq_pairs_left} Q/DQ pairs left"
            )
        if self.kept_float:
            lines.append(f"kept float: {', '.join(self.kept_float)}")
        if self.target_cpu:
            lines.append(f"made for {CpuKind(self.target_cpu).description}: {self.holds_on()}")
        return lines + self.warnings()

    def warnings(self) -> list[str]:
        return [self.confidence] if self.confidence else []

    def pareto(self) -> list[Int8Try]:
        """The tries no other try beats on both accuracy (top-1 agreement, else cosine) and speed, fastest first:
        the choices between accuracy and speed the search found."""
        points = {t.point(): (accuracy, t.speedup, t) for t in self.tries if t.speedup and (accuracy := t.accuracy())}
        front = [
            (speed, t)
            for accuracy, speed, t in points.values()
            if not any(a >= accuracy and s >= speed and (a, s) != (accuracy, speed) for a, s, _ in points.values())
        ]
        return [t for _, t in sorted(front, key=lambda pair: -pair[0])]

    def vnni_only(self) -> bool:
        """Full-range weights judged on a VNNI CPU: on an AVX2 CPU they saturate, and the verdict does not hold."""
        return self.full_range_weights and self.judged_on == CpuKind.VNNI

    def holds_on(self) -> str:
        if self.vnni_only():
            return "its verdict holds on VNNI CPUs only (full-range weights saturate on AVX2)"
        if self.full_range_weights:
            return "its verdict holds on any x86-64 CPU (judged with AVX2's saturation, which VNNI does not have)"
        return "its verdict holds on any x86-64 CPU (7-bit weights never saturate)"

    def triton_parameters(self) -> dict[str, str]:
        if not self.target_cpu:
            return {}
        return {PARAM_INT8_CPU: f"{CpuKind(self.target_cpu).value}: {self.recipe}; {self.holds_on()}"}

    @classmethod
    def _typed(cls, values: JsonObject) -> JsonObject:
        tries = [
            t | {"interval": tuple(t["interval"]) if t.get("interval") else None} for t in values.get("tries") or []
        ]
        return super()._typed(values) | {"tries": [Int8Try(**t) for t in tries]}
