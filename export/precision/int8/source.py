"""The graph an INT8 variant is quantized from: the fp32 artifact, or, for a transformer encoder whose adapted model
offers `fusable_attention` (checkpoint.families.model_hooks), the same model with its attention fused.

Dynamic INT8 gains little on a transformer as torch exports it: ONNX Runtime's integer kernels speed up the weight
MatMuls, while attention, LayerNorm and GELU stay many small fp32 ops. ONNX Runtime's transformer optimizer fuses
them into its own ops (Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu: contrib ops every ONNX
Runtime since 1.x runs, Triton 24.10's 1.19.2 included), and Attention quantizes as one QAttention. It matches the
pattern transformers' eager attention exports to with the TorchScript-based exporter; the SDPA export (dynamo or
legacy) matches none. So the source is that export, fused; then smoothed (export.precision.int8.smooth), for any
dynamic source; and verified against eager with the fp32 tolerance before anything is quantized from it. The fp32
artifact itself stays as exported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelship.checkpoint.families.model_hooks import fusable_attention
from modelship.contract.iospec import IOSpec
from modelship.contract.opsets import OnnxExporter
from modelship.export.build import Build
from modelship.export.formats.onnx.graph import LEGACY_MAX_OPSET, export_onnx
from modelship.export.precision.int8.quantize import quiet
from modelship.export.precision.int8.recipe import WEIGHT_OPS
from modelship.export.precision.int8.smooth import ALPHA, smooth
from modelship.parity import OnnxRuntimeRunner

DYNAMIC_OPS = tuple(op for op in WEIGHT_OPS if op != "Conv")  # dynamic INT8 quantizes no convolution
FUSED_OPS = ("Attention",)  # fused ops the dynamic quantizer quantizes too (as QAttention)


@dataclass(frozen=True)
class Int8Source:
    """The fp32 graph to quantize (`path`), the op types quantized in it (`ops`), whether it was smoothed (its weights
    then need per-channel scales), why it is that graph (`why`, for the manifest's choices) and the scratch files
    written for it (`files`)."""

    path: Path
    ops: tuple[str, ...]
    smoothed: bool = False
    why: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()


def dynamic_source(build: Build, fp32: Path, io: IOSpec) -> Int8Source:
    """The graph dynamic INT8 quantizes: the fp32 artifact at `fp32`, fused where the model offers fusable
    attention, smoothed where weight ops read a normalization, as long as the result passes the fp32 verification;
    else the artifact itself, with why."""
    scratch = tuple(fp32.with_name(f"int8-{step}.onnx") for step in ("eager", "fused", "smoothed"))
    why: list[str] = []
    source, ops = fp32, DYNAMIC_OPS
    if _fuse_attention(build, io, scratch[0], scratch[1], why):
        source, ops = scratch[1], (*DYNAMIC_OPS, *FUSED_OPS)
    with build.steps("smooth activations", "onnx_int8"):
        smoothed = smooth(source, scratch[2], build.verification.random_sets, ops)
    if smoothed:
        source = scratch[2]
        why.append(
            f"{smoothed} normalization outputs smoothed before quantization (alpha {ALPHA}, maxima from the export's "
            "seeded inputs): their outlier channels moved into the per-channel weights"
        )
    if source == fp32:
        return Int8Source(fp32, ops, why=tuple(why))
    runner = OnnxRuntimeRunner(source, io, name="onnx_int8_source", isolated=False)
    try:
        with build.steps("verify int8 source", "onnx_int8"):
            report = build.verify_with(runner, "fp32")
    finally:
        runner.close()
    if not report.passed:
        differs = f"quantized as exported: the rewritten graph differs from eager ({report.failures()[0]})"
        return Int8Source(fp32, DYNAMIC_OPS, why=(differs,), files=scratch)
    return Int8Source(source, ops, bool(smoothed), tuple(why), scratch)


def _fuse_attention(build: Build, io: IOSpec, exported: Path, fused: Path, why: list[str]) -> bool:
    """Export the model with eager attention to `exported` and fuse it into `fused`; whether attention fused."""
    attention = fusable_attention(build.model)
    if attention is None or io != build.io:
        return False
    try:
        with build.steps("fuse attention", "onnx_int8"), attention.eager():
            export_onnx(
                build.model,
                exported,
                io,
                build.example,
                opset=min(build.plan.opset, LEGACY_MAX_OPSET),
                target=build.plan.target,
                exporter=OnnxExporter.LEGACY,
            )
            counts = _fuse(exported, fused, attention.num_heads, attention.hidden_size)
    except Exception as exc:  # an optional speed step: without it the artifact itself is quantized
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        why.append(f"quantized as exported: the eager-attention export or its fusion failed ({reason[:200]})")
        return False
    listed = ", ".join(f"{op} {count}" for op, count in sorted(counts.items()) if count)
    if not counts.get("Attention"):
        why.append(f"quantized as exported: ONNX Runtime's optimizer fused no attention ({listed or 'nothing'})")
        return False
    why.append(
        f"quantized from the model exported with eager attention, fused by ONNX Runtime's transformer optimizer "
        f"({listed}): attention quantizes as one QAttention"
    )
    return True


def _fuse(source: Path, out: Path, num_heads: int, hidden_size: int) -> dict[str, int]:
    """ONNX Runtime's transformer optimizer (BERT fusions, its basic graph optimizations) on `source`, written to
    `out`; the fused operators' counts."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    options.use_raw_attention_mask()  # the mask as given: its default turns it into lengths (padding at the end only)
    with quiet():
        optimized = optimize_model(
            str(source),
            model_type="bert",
            num_heads=num_heads,
            hidden_size=hidden_size,
            opt_level=1,
            optimization_options=options,
        )
        optimized.save_model_to_file(str(out))
    return {op: int(count) for op, count in optimized.get_fused_operator_statistics().items()}
