"""The ONNX fp16 variant (`onnx_fp16`): the fp32 graph converted keeping in fp32 the nodes whose measured ranges
leave float16's (ranges.py) and the modules of --fp16-keep; verified twice, as ONNX Runtime runs it here and as fp16
really computes (fp16 rounding emulated at every node boundary, which a CPU run cannot show); on a failure retried
keeping more sensitive ops in fp32 (FP16_ATTEMPTS), then the fewest modules of the failing region to keep are found
(bisection). The conversion itself is convert.py; TorchScript's variant is torchscript_variant.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import onnx

from modelship.contract.artifact_details import Fp16Attempt, Fp16Run, OnnxDetails, OnnxFp16Details
from modelship.contract.iospec import IOSpec
from modelship.contract.tensors import Tensors
from modelship.export.build import Build, BuiltArtifact, Finish, Written, float_io
from modelship.export.formats.onnx.graph import cap_versions, set_metadata, write_model
from modelship.export.precision.fallback import Bisect
from modelship.export.precision.fp16.convert import FP16_ATTEMPTS, convert_onnx_fp16, fp32_nodes, present_ops
from modelship.export.precision.fp16.options import Fp16Options
from modelship.export.precision.fp16.ranges import emulate_fp16, intermediate_ranges, out_of_range_nodes
from modelship.parity import OnnxRuntimeRunner, ParityReport
from modelship.parity.isolation import Worker
from modelship.parity.onnx_graph import name_nodes, node_module, nodes_of

BISECT_STEP = "bisect fp16 modules"
# emulated fp16 runs the bisection may take: each verifies every input set (1 s for a 7-class SSDlite's 22 images,
# about 10 s with 91 classes, where an unbounded bisection ran for 20 minutes)
BISECT_TRIALS = 24


def start_onnx_fp16(build: Build, written: Written) -> Finish:
    """The `onnx_fp16` variant (export.precision.fp16) of the fp32 graph `written`: converted and verified now."""
    half_io = build.spec.options_for(Fp16Options).io
    io = float_io(written.io, "float16", inputs=half_io, outputs=half_io)
    built = onnx_fp16(build, written, io)
    return lambda: built


def onnx_fp16(build: Build, written: Written, io: IOSpec) -> BuiltArtifact:
    """The fp16 variant of the `written` fp32 ONNX model (see the module doc), verified, with its details."""
    worker = Worker(preload=("onnxruntime",))  # the CPU runs' child, importing while the ranges are measured
    try:
        return _onnx_fp16_in(build, written, io, worker)
    finally:
        worker.close()


def _onnx_fp16_in(build: Build, written: Written, io: IOSpec, worker: Worker) -> BuiltArtifact:
    fp32 = written.graph
    external = isinstance(written.details, OnnxDetails) and written.details.external_data
    name = "onnx_fp16"
    name_nodes(fp32)
    with build.steps("measure fp16 ranges", name):
        kept_nodes = out_of_range_nodes(fp32, intermediate_ranges(fp32, graph_sets(build.verification.inputs, io)))
    keep_modules = list(build.spec.options_for(Fp16Options).keep)
    nodes = fp32_nodes(fp32, build.model, keep_modules, [k.node for k in kept_nodes])
    attempts: list[Fp16Attempt] = []
    kept: list[str] = []
    written_file: _Converted | None = None
    block: tuple[str, ...] = ()
    for reason, block in FP16_ATTEMPTS:
        present = present_ops(fp32, block)
        if attempts and present == kept:
            continue  # this block list keeps no op the previous attempt converted: same graph
        kept = present
        written_file = _fp16_attempt(build, fp32, io, block, nodes, ", ".join(kept), worker, external)
        report, cpu = written_file.report, written_file.cpu
        cpu_run = Fp16Run(cpu.passed, cpu.failures())
        attempts.append(Fp16Attempt(kept, reason, report.passed, report.failures(), cpu_run))
        if report.passed:
            break
    assert written_file is not None
    if not written_file.report.passed:
        with build.steps(BISECT_STEP, name):
            found = _bisect_fp16(build, fp32, block, nodes, io)
        if found:
            keep_modules += found
            nodes += nodes_of(fp32, found)
            label = f"modules {', '.join(found)}"
            written_file = _fp16_attempt(build, fp32, io, block, nodes, label, worker, external)
    details = replace(
        OnnxFp16Details.from_dict(written.details.to_dict()),  # the fp32 graph's export details, as fp16's type
        nodes=written_file.nodes,
        fp16_io=build.spec.options_for(Fp16Options).io,
        kept_fp32_ops=kept,
        kept_fp32_nodes=list(kept_nodes),
        fp16_keep=keep_modules,
        fp16_verdict="fp16 rounding emulated at every node boundary, and ONNX Runtime CPU",
        fp16_attempts=attempts,
    )
    return BuiltArtifact(name, "onnx", "fp16", io, written_file.report, details, written_file.sha256)


@dataclass(frozen=True)
class _Converted:
    """One fp16 conversion written: its verdict, ONNX Runtime's CPU run of it, its sha256 and node count."""

    report: ParityReport
    cpu: ParityReport
    sha256: str
    nodes: int


def _fp16_attempt(
    build: Build,
    fp32: onnx.ModelProto,
    io: IOSpec,
    block: Sequence[str],
    nodes: list[str],
    label: str,
    worker: Worker,
    external: bool,
) -> _Converted:
    """Write the fp16 artifact keeping `block` ops and `nodes` in fp32 (its weights split like the fp32 file's when
    `external`). The verdict fails when either the emulated fp16 run or ONNX Runtime's CPU run fails."""
    name = "onnx_fp16"
    with build.steps(f"convert {name}" + (f" (fp32: {label})" if label else ""), name):
        proto = convert_onnx_fp16(
            fp32, keep_io_types=not build.spec.options_for(Fp16Options).io, op_block_list=block, node_block_list=nodes
        )
        cap_versions(proto, build.plan.target)
        set_metadata(proto, build.plan.provenance | {"precision": "fp16"})
        sha256 = write_model(proto, build.path(name), external=external)
    # ONNX Runtime has segfaulted creating fp16 CPU sessions (vit_b_16): run it in a child process.
    runner = OnnxRuntimeRunner(build.path(name), io, name=name, isolated=True, fp16=True, worker=worker)
    try:
        cpu = build.verify(name, runner, "fp16")
    finally:
        runner.close()  # a child of its own only if the worker died
    with build.steps(f"verify {name}", name):
        real = build.verify_with(_emulated_runner(fp32, block, nodes, io), "fp16")
    report = cpu if real.passed else real  # the failing one, so its reasons are the ones shown
    report.passed = real.passed and cpu.passed
    return _Converted(report, cpu, sha256, len(proto.graph.node))


def _emulated_runner(fp32: onnx.ModelProto, block: Sequence[str], nodes: list[str], io: IOSpec) -> Any:
    """A runner of the fp16 artifact as float16 really computes (fp32 graph rounding at every fp16 boundary)."""
    emulated = emulate_fp16(fp32, nodes, block).SerializeToString()
    return OnnxRuntimeRunner(Path("fp16-emulated.onnx"), io, name="onnx_fp16", fp16=True, model=emulated)


def graph_sets(sets: Sequence[Tensors], io: IOSpec) -> list[Tensors]:
    """The input sets as the graph takes them: row by row for a single-row graph (IOSpec.max_rows)."""
    if not io.max_rows:
        return list(sets)
    return [{k: v[i : i + 1] for k, v in s.items()} for s in sets for i in range(len(next(iter(s.values()))))]


def _bisect_fp16(build: Build, fp32: onnx.ModelProto, block: Sequence[str], nodes: list[str], io: IOSpec) -> list[str]:
    """The fewest modules, from the first one that diverges onwards, whose nodes kept in fp32 make the emulated
    fp16 run pass; [] when even all of them do not. At most BISECT_TRIALS emulated runs, each shown as progress:
    past them a set counts as failing, so the halving keeps every module it has not yet cleared (more kept in
    fp32, never a set that fails)."""
    from modelship.parity.localize import localize_onnx

    emulated = emulate_fp16(fp32, nodes, block)
    first = localize_onnx(emulated, build.model, build.io, build.verification.inputs[0], "fp16", "onnx_fp16").first
    modules = list(dict.fromkeys(m for n in fp32.graph.node if (m := node_module(n))))
    start = next((i for i, m in enumerate(modules) if first and (m + ".").startswith(first.module + ".")), 0)
    tolerance = build.spec.tolerance("fp16")
    search = Bisect(modules[start:])
    while (chosen := search.next()) is not None:
        if search.judged >= BISECT_TRIALS:  # past the budget a set counts as failing: more kept, never a failing set
            search.step(False)
            continue
        runner = _emulated_runner(fp32, block, nodes + nodes_of(fp32, chosen), io)
        passed = build.verification.judge(runner, tolerance).passed
        verdict = "passes" if passed else "fails"
        run = f"run {search.judged + 1}/{BISECT_TRIALS}: {len(chosen)} modules in fp32 {verdict}"
        build.steps.progress(BISECT_STEP, run)
        search.step(passed)
    return search.result or []
