"""The export pipeline: eager model -> TorchScript / ONNX (fp32, fp16) -> verified against eager -> export folder.

Every artifact is compared with the eager model by the parity engine on the same seeded inputs, at every batch
size asked for and at a second size of every other dynamic axis. Everything is built in a staging folder next to
the destination (same filesystem) and moved into place only when every artifact passed, so a failed or
interrupted export never leaves a half-written folder; `force` replaces an existing export by two renames.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
import torch
from torch import nn

from modelship import __version__
from modelship.contract.artifacts import DEFAULT_FORMATS, EXPORT_FILES, EXPORT_FORMATS, GOLDEN_FILE, SIDECAR_FILE
from modelship.contract.errors import ExportError, ParityError, UsageError, os_failure
from modelship.contract.iospec import BATCH, IOSpec, TensorSpec
from modelship.contract.manifest import Artifact, Manifest, Source, StepTiming, sha256_file
from modelship.contract.names import check_name
from modelship.contract.opsets import DEFAULT_TRITON, resolve_opset, runtime_target
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.staging import Plan, commit, staging_folder, sweep, writable_parent
from modelship.export.fp16 import (
    FP16_ATTEMPTS,
    convert_onnx_fp16,
    fp16_keep_modules,
    half_module,
    half_with_float_io,
    present_ops,
)
from modelship.export.io_resolve import (
    InputOption,
    ResolvedInputs,
    base_sizes,
    discover_outputs,
    parse_input_option,
    resolve_inputs,
    torch_inputs,
)
from modelship.export.labels import default_labels
from modelship.export.onnx_export import (
    EXPORTERS,
    LEGACY_MAX_OPSET,
    cap_versions,
    export_onnx,
    provenance_metadata,
    set_metadata,
    write_model,
)
from modelship.export.parity import (
    GoldenRunner,
    OnnxRuntimeRunner,
    ParityReport,
    ToleranceConfig,
    TorchRunner,
    compare_runners,
    input_sets,
    random_inputs,
    save_golden,
)
from modelship.export.parity.fp16_ranges import (
    emulate_fp16,
    intermediate_ranges,
    name_nodes,
    node_module,
    nodes_of,
    out_of_range_nodes,
)
from modelship.export.parity.isolation import Worker
from modelship.export.pt2_export import compile_aoti, export_program, save_program
from modelship.export.torchscript import save_and_reload, script_module, trace_module


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
    exporter: str = "dynamo"
    trace: bool = False
    input_options: tuple[InputOption | str, ...] = ()  # --input values, parsed here: refused before any loading
    dynamic: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = (1, 7)
    tolerances: dict[str, dict[str, Any]] = field(default_factory=dict)
    force: bool = False
    triton: str = DEFAULT_TRITON
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "formats", tuple(dict.fromkeys(self.formats or DEFAULT_FORMATS)))
        parsed = tuple(parse_input_option(o) if isinstance(o, str) else o for o in self.input_options)
        object.__setattr__(self, "input_options", parsed)
        unknown = sorted(set(self.formats) - set(EXPORT_FORMATS))
        if unknown:
            raise UsageError(f"unknown export format(s): {', '.join(unknown)}", hint=f"use {', '.join(EXPORT_FORMATS)}")
        if self.exporter not in EXPORTERS:
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
        ToleranceConfig.for_precision("fp32", self.tolerances)  # validate early
        ToleranceConfig.for_precision("fp16", self.tolerances)

    @property
    def name(self) -> str:
        return self.out_dir.name


class Listener(Protocol):
    """Progress callbacks (the CLI shows them with rich on stderr)."""

    def started(self, step: str) -> None: ...

    def finished(self, step: str, seconds: float, ok: bool) -> None: ...


class Steps:
    """Times named steps, tells the listener, keeps the list for the manifest."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.timings: list[StepTiming] = []
        self._listener = listener

    @contextlib.contextmanager
    def __call__(self, step: str, artifact: str | None = None) -> Iterator[None]:
        if self._listener:
            self._listener.started(step)
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            seconds = time.perf_counter() - start
            self.timings.append(StepTiming(step, seconds, artifact, ok))
            if self._listener:
                self._listener.finished(step, seconds, ok)

    def seconds(self, artifact: str) -> dict[str, float]:
        """Per-step seconds of one artifact, keyed by the step's first word (script, export, convert, verify)."""
        out: dict[str, float] = {}
        for t in self.timings:
            if t.artifact == artifact:
                key = t.step.split()[0]
                out[key] = round(out.get(key, 0.0) + t.seconds, 4)
        return out


@dataclass
class ExportResult:
    manifest: Manifest
    folder: Path
    reports: dict[str, ParityReport]
    timings: list[StepTiming]


@dataclass
class _Verification:
    """Seeded input sets, their labels and the eager outputs for them (computed once, replayed per artifact)."""

    inputs: list[dict[str, np.ndarray]]
    labels: list[str]
    outputs: list[dict[str, np.ndarray]]

    @property
    def reference(self) -> GoldenRunner:
        return GoldenRunner(self.inputs, self.outputs, name="eager")


def run_export(
    model: nn.Module,
    spec: ExportSpec,
    *,
    source: Source,
    metadata: dict[str, Any] | None = None,
    preprocess: PreprocessSpec | None = None,
    sidecar: dict[str, Any] | None = None,
    steps: Steps | None = None,
) -> ExportResult:
    """Export, verify and write `spec.out_dir`. Raises ExportError/ParityError with nothing written on failure.

    `metadata` is the checkpoint's metadata (may hold "io", "labels"); `preprocess` the model's preprocessing spec
    when known (the loader's `LoadedModel.preprocess`); `sidecar` is written as checkpoint.json beside the
    artifacts.
    """
    metadata = dict(metadata or {})
    dest = spec.out_dir
    refuse_existing(dest, spec.force)
    target = runtime_target(spec.triton)
    opset = resolve_opset(spec.opset, target, LEGACY_MAX_OPSET if spec.exporter == "legacy" else None)
    model = model.eval()
    steps = steps or Steps()

    with steps("resolve inputs and outputs"):
        resolved = resolve_inputs(
            model,
            arch=source.arch,
            metadata=metadata,
            preprocess=preprocess,
            input_options=spec.input_options,
            dynamic=spec.dynamic,
        )
        io = discover_outputs(model, resolved)
    with steps("reference outputs (eager)"):
        verification = _reference(model, io, resolved, spec)
    provenance = provenance_metadata(
        name=spec.name,
        checkpoint_sha256=source.sha256,
        arch=source.arch,
        version=__version__,
        io=io.to_dict(),
        preprocess=preprocess.to_dict() if preprocess is not None else None,
    )
    example = torch_inputs(io, base_sizes(resolved), spec.seed)

    sweep(writable_parent(dest, "the export"))
    staging = staging_folder(dest.parent, spec.name)
    try:
        artifacts, reports = _build_artifacts(
            _Build(model, spec, io, example, verification, staging, steps, opset, target, provenance)
        )
        failed = [name for name, report in reports.items() if not report.passed]
        if failed:
            failing = [(a, reports[a.name]) for a in artifacts if a.name in failed]
            explained = _explain(staging, failing, model, io, verification)
            raise ParityError(
                f"{', '.join(failed)} differ{'s' if len(failed) == 1 else ''} from eager PyTorch beyond tolerance: "
                + "; ".join(
                    f"{name}: {', '.join(reports[name].failures()[:2])}"
                    + (f" - {explained[name].lines()[0]}" if name in explained else "")
                    for name in failed
                ),
                hint="see the parity table; loosen with --atol/--rtol/--fp16-atol/--fp16-rtol only if the "
                "difference is acceptable",
                details={
                    "artifacts": {name: r.to_dict() for name, r in reports.items()},
                    "failed": failed,
                    "explain": {name: e.to_dict() for name, e in explained.items()},
                },
            )
        save_golden(staging / GOLDEN_FILE, verification.inputs, verification.outputs)
        if sidecar is not None:
            (staging / SIDECAR_FILE).write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
        manifest = Manifest(
            name=spec.name,
            source=source,
            io=io,
            artifacts=artifacts,
            preprocess=preprocess,
            labels=metadata.get("labels") or default_labels(source.arch, io.outputs[0]),
            golden=GOLDEN_FILE,
            timings=list(steps.timings),
            tool_version=__version__,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        manifest.write(staging)
        _move_into_place(staging, dest, spec.force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(manifest, dest, reports, steps.timings)


def _explain(
    folder: Path,
    failed: list[tuple[Artifact, ParityReport]],
    model: nn.Module,
    io: IOSpec,
    verification: _Verification,
) -> dict[str, Any]:
    """Where each failing artifact parts from eager PyTorch (export.explain), on the first input set it failed."""
    from modelship.export.explain import explain_artifact

    explained = {}
    for artifact, report in failed:
        inputs = verification.inputs[report.first_failed_set()]
        try:
            explained[artifact.name] = explain_artifact(folder, artifact, model, io, inputs)
        except Exception as exc:  # localisation is a diagnosis: its own failure must not hide the parity verdict
            explained[artifact.name] = _not_localised(artifact.name, exc)
    return explained


def _not_localised(name: str, exc: Exception) -> Any:
    from modelship.export.parity.localize import Explanation

    return Explanation(name, None, 0, [f"could not localise: {type(exc).__name__}: {exc}"])


def refuse_existing(dest: Path, force: bool) -> None:
    """ExportError when `dest` exists and `force` is off (checked first, and again just before the move)."""
    if dest.exists() and not force:
        raise ExportError(
            f"{dest} already exists",
            hint="pass --force to replace it, or choose another --name/--out",
            details={"folder": str(dest)},
        )


def _reference(model: nn.Module, io: IOSpec, resolved: ResolvedInputs, spec: ExportSpec) -> _Verification:
    """Input sets at every batch size, plus one per other dynamic axis at its second size; eager outputs."""
    sets = input_sets(io, spec.batch_sizes, seed=spec.seed, sizes=resolved.sizes)
    labels = [f"batch {b}" for b in spec.batch_sizes]
    base = {axis: size for axis, size in base_sizes(resolved).items() if axis != BATCH}
    for i, axis in enumerate(a for a in resolved.dynamic_axes if a != BATCH):
        sizes = base | {axis: resolved.second_size(axis), BATCH: spec.batch_sizes[-1]}
        sets.append(random_inputs(io, sizes, spec.seed + len(spec.batch_sizes) + i))
        labels.append(f"batch {spec.batch_sizes[-1]}, {axis} {sizes[axis]}")
    eager = TorchRunner(model, io, name="eager")
    return _Verification(sets, labels, [eager.run(inputs) for inputs in sets])


@dataclass
class _Build:
    """What every artifact step shares: the model, its I/O, the seeded example and eager reference, the staging
    folder and step timer, and the ONNX target."""

    model: nn.Module
    spec: ExportSpec
    io: IOSpec
    example: tuple[torch.Tensor, ...]
    verification: _Verification
    staging: Path
    steps: Steps
    opset: int
    target: Any
    provenance: dict[str, str]
    hashes: dict[str, str] = field(default_factory=dict)  # sha256 of the artifacts hashed as they were written
    nodes: dict[str, int] = field(default_factory=dict)  # node counts of the ONNX artifacts written
    external_data: bool = False  # the fp32 ONNX weights passed protobuf's limit: the fp16 file is split too

    def path(self, name: str) -> Path:
        return self.staging / EXPORT_FILES[name]

    def verify(self, name: str, runner: Any, precision: str) -> ParityReport:
        """`runner` against the eager reference, timed as the step "verify <name>"."""
        with self.steps(f"verify {name}", name):
            return self.verify_with(runner, precision)

    def verify_with(self, runner: Any, precision: str) -> ParityReport:
        tolerance = ToleranceConfig.for_precision(precision, self.spec.tolerances)
        reference = self.verification
        return compare_runners(reference.reference, runner, reference.inputs, tolerance, labels=reference.labels)


def _build_artifacts(build: _Build) -> tuple[list[Artifact], dict[str, ParityReport]]:
    spec, io = build.spec, build.io
    artifacts: list[Artifact] = []
    reports: dict[str, ParityReport] = {}
    precisions = ("fp32", "fp16") if spec.fp16 else ("fp32",)

    def record(name: str, fmt: str, precision: str, art_io: IOSpec, report: ParityReport, details: dict) -> None:
        path = build.path(name)
        details = {**details, "bytes": path.stat().st_size, "seconds": build.steps.seconds(name)}
        digest = build.hashes.get(name) or sha256_file(path)
        artifacts.append(Artifact(name, fmt, precision, EXPORT_FILES[name], digest, art_io, report, details))
        reports[name] = report

    # TorchScript verifications run on a second thread while the other formats export: the eager half forward
    # takes one core only (torch computes float16 on the CPU single-threaded) and the exporters mostly hold the GIL
    # in Python. The thread only runs the reloaded ScriptModules; everything touching the eager model stays here.
    background = ThreadPoolExecutor(1, thread_name_prefix="modelship-verify")
    try:
        finishing = []
        if "torchscript" in spec.formats:
            for precision in reversed(precisions):  # fp16 first: its half verification is the longest
                name = "torchscript" if precision == "fp32" else "torchscript_fp16"
                half_io = precision == "fp16" and spec.fp16_io
                art_io = float_io(io, "float16", inputs=half_io, outputs=half_io)
                finishing.append((name, precision, art_io, _torchscript(build, name, art_io, background)))
        _other_formats(build, record)
        for name, precision, art_io, finish in finishing:
            report, details = finish()
            record(name, "torchscript", precision, art_io, report, details)
    finally:
        background.shutdown(cancel_futures=True)  # on a failure, verifications not started are dropped
    order = list(EXPORT_FILES)
    artifacts.sort(key=lambda a: order.index(a.name))
    return artifacts, {a.name: reports[a.name] for a in artifacts}


def _other_formats(build: _Build, record: Any) -> None:
    """pt2 and ONNX (fp32, then fp16), each verified as it is written."""
    spec, io = build.spec, build.io
    if "pt2" in spec.formats:
        _pt2(build, record)
    if "onnx" in spec.formats:
        name = "onnx"
        with build.steps("export onnx", name):
            exported = export_onnx(
                build.model,
                build.path(name),
                io,
                build.example,
                opset=build.opset,
                target=build.target,
                exporter=spec.exporter,
                metadata=build.provenance | {"precision": "fp32"},
            )
            check_dynamic_axes(exported.proto, io)
        build.hashes[name] = exported.sha256
        build.external_data = exported.details["external_data"]
        report = build.verify(name, OnnxRuntimeRunner(build.path(name), io, name=name, fp16=False), "fp32")
        record(name, "onnx", "fp32", io, report, exported.details)
        if spec.fp16:
            art_io = float_io(io, "float16", inputs=spec.fp16_io, outputs=spec.fp16_io)
            report, fp16_details = _onnx_fp16(build, exported.proto, art_io)
            record("onnx_fp16", "onnx", "fp16", art_io, report, {**exported.details, **fp16_details})


def _pt2(build: _Build, record: Any) -> None:
    """torch.export's ExportedProgram and the AOTInductor package compiled from it, each verified like the rest."""
    with build.steps("torch.export pt2", "pt2"):
        program = export_program(build.model, build.example, build.io)
        module = save_program(program, build.path("pt2"))
    record("pt2", "pt2", "fp32", build.io, build.verify("pt2", TorchRunner(module, build.io, name="pt2"), "fp32"), {})
    with build.steps("compile aoti", "aoti"):
        package = compile_aoti(program, build.path("aoti"))
    runner = TorchRunner(package, build.io, name="aoti")
    record("aoti", "aoti", "fp32", build.io, build.verify("aoti", runner, "fp32"), {"compiler": "AOTInductor"})


def _torchscript(
    build: _Build, name: str, io: IOSpec, background: ThreadPoolExecutor
) -> Callable[[], tuple[ParityReport, dict[str, Any]]]:
    """TorchScript of the model, written now and verified on `background`; returns what waits for the verdict.
    The fp16 variant takes and returns float32 (casts inside) unless --fp16-io. fp16 computes in real half
    precision on the CPU, so its verdict holds as is; when it fails, the modules whose own half computation
    diverges are kept in fp32 (measured on the batch that failed) and it is built and verified again."""
    half = name.endswith("fp16")
    precision = "fp16" if half else "fp32"
    details: dict[str, Any] = {"method": "trace" if build.spec.trace else "script", "fp16_io": False}
    if half:
        details |= {"fp16_io": build.spec.fp16_io, "fp16_keep": list(build.spec.fp16_keep)}
    runner = TorchRunner(_script(build, name, details, list(build.spec.fp16_keep)), io, name=name)
    verdict = background.submit(build.verify, name, runner, precision)

    def finish() -> tuple[ParityReport, dict[str, Any]]:
        report = verdict.result()
        if half and not report.passed:
            failed = build.verification.inputs[report.first_failed_set()]
            with build.steps("measure fp16 ranges", name):
                batch = tuple(torch.from_numpy(failed[t.name]) for t in build.io.inputs)
                kept = fp16_keep_modules(build.model, [batch])
            if kept:
                details["kept_fp32_modules"] = kept
                keep = [*build.spec.fp16_keep, *(k["module"] for k in kept)]
                report = build.verify(name, TorchRunner(_script(build, name, details, keep), io, name=name), precision)
        return report, details

    return finish


def _script(build: _Build, name: str, details: dict[str, Any], keep: list[str]) -> Any:
    """Script (or trace) the model, or its half copy keeping `keep` in fp32; saved and loaded back."""
    half = name.endswith("fp16")
    half_io = details["fp16_io"]
    module = build.model
    if half:
        module = (
            half_module(build.model, keep)
            if half_io
            else half_with_float_io(build.model, build.io, build.example, keep)
        )
    with build.steps(f"{details['method']} {name}", name):
        if build.spec.trace:
            args = tuple(t.half() if half_io and t.is_floating_point() else t for t in build.example)
            scripted, notes = trace_module(module, args)
            details["tracer_warnings"] = notes
        else:
            scripted = script_module(module)
        return save_and_reload(scripted, build.path(name))


def _onnx_fp16(build: _Build, fp32: onnx.ModelProto, io: IOSpec) -> tuple[ParityReport, dict[str, Any]]:
    """Convert the fp32 ONNX file keeping in fp32 the nodes whose measured ranges leave float16's (and the modules
    of --fp16-keep); verify it twice: as ONNX Runtime runs it here, and as fp16 really computes
    (export.fp16_ranges.emulate_fp16), which a CPU run cannot show. If parity fails, retry keeping more sensitive
    ops in fp32 (FP16_ATTEMPTS), then find the fewest modules of the failing region to keep (bisection)."""
    worker = Worker(preload=("onnxruntime",))  # the CPU runs' child, importing while the ranges are measured
    try:
        return _onnx_fp16_in(build, fp32, io, worker)
    finally:
        worker.close()


def _onnx_fp16_in(
    build: _Build, fp32: onnx.ModelProto, io: IOSpec, worker: Worker
) -> tuple[ParityReport, dict[str, Any]]:
    name = "onnx_fp16"
    name_nodes(fp32)
    with build.steps("measure fp16 ranges", name):
        kept_nodes = out_of_range_nodes(fp32, intermediate_ranges(fp32, build.verification.inputs))
    keep_modules = list(build.spec.fp16_keep)
    nodes = [k.node for k in kept_nodes] + nodes_of(fp32, keep_modules)
    attempts: list[dict[str, Any]] = []
    kept: list[str] = []
    report: ParityReport | None = None
    block: tuple[str, ...] = ()
    for reason, block in FP16_ATTEMPTS:
        present = present_ops(fp32, block)
        if attempts and present == kept:
            continue  # this block list keeps no op the previous attempt converted: same graph
        kept = present
        report, cpu = _fp16_attempt(build, fp32, io, block, nodes, ", ".join(kept), worker)
        attempts.append({"kept_fp32": kept, "reason": reason, "passed": report.passed, "failures": report.failures()})
        attempts[-1]["cpu_run"] = {"passed": cpu.passed, "failures": cpu.failures()}
        if report.passed:
            break
    assert report is not None
    if not report.passed:
        with build.steps("bisect fp16 modules", name):
            found = _bisect_fp16(build, fp32, block, nodes)
        if found:
            keep_modules += found
            nodes += nodes_of(fp32, found)
            report, _ = _fp16_attempt(build, fp32, io, block, nodes, f"modules {', '.join(found)}", worker)
    details = {
        "nodes": build.nodes[name],
        "fp16_io": build.spec.fp16_io,
        "kept_fp32_ops": kept,
        "kept_fp32_nodes": [k.to_dict() for k in kept_nodes],
        "fp16_keep": keep_modules,
        "fp16_verdict": "fp16 rounding emulated at every node boundary, and ONNX Runtime CPU",
    }
    return report, details | {"fp16_attempts": attempts}


def _fp16_attempt(
    build: _Build,
    fp32: onnx.ModelProto,
    io: IOSpec,
    block: Sequence[str],
    nodes: list[str],
    label: str,
    worker: Worker,
) -> tuple[ParityReport, ParityReport]:
    """Write the fp16 artifact keeping `block` ops and `nodes` in fp32; (the verdict, the CPU run's report). The
    verdict fails when either the emulated fp16 run or ONNX Runtime's CPU run fails."""
    name = "onnx_fp16"
    with build.steps(f"convert {name}" + (f" (fp32: {label})" if label else ""), name):
        proto = convert_onnx_fp16(
            fp32, keep_io_types=not build.spec.fp16_io, op_block_list=block, node_block_list=nodes
        )
        cap_versions(proto, build.target)
        set_metadata(proto, build.provenance | {"precision": "fp16"})
        build.hashes[name] = write_model(proto, build.path(name), external=build.external_data)
        build.nodes[name] = len(proto.graph.node)
    # ONNX Runtime has segfaulted creating fp16 CPU sessions (vit_b_16): run it in a child process.
    runner = OnnxRuntimeRunner(build.path(name), io, name=name, isolated=True, fp16=True, worker=worker)
    try:
        cpu = build.verify(name, runner, "fp16")
    finally:
        runner.close()  # a child of its own only if the worker died
    with build.steps(f"verify {name}", name):
        real = build.verify_with(_emulated_runner(fp32, block, nodes), "fp16")
    report = cpu if real.passed else real  # the failing one, so its reasons are the ones shown
    report.passed = real.passed and cpu.passed
    return report, cpu


def _emulated_runner(fp32: onnx.ModelProto, block: Sequence[str], nodes: list[str]) -> Any:
    """A runner of the fp16 artifact as float16 really computes (fp32 graph rounding at every fp16 boundary)."""
    emulated = emulate_fp16(fp32, nodes, block).SerializeToString()
    return OnnxRuntimeRunner(Path("fp16-emulated.onnx"), name="onnx_fp16", fp16=True, model=emulated)


def _bisect_fp16(build: _Build, fp32: onnx.ModelProto, block: Sequence[str], nodes: list[str]) -> list[str]:
    """The fewest modules, from the first one that diverges onwards, whose nodes kept in fp32 make the emulated
    fp16 run pass; [] when even all of them do not."""
    from modelship.export.parity.localize import localize_onnx, minimal_keep

    emulated = emulate_fp16(fp32, nodes, block)
    first = localize_onnx(emulated, build.model, build.io, build.verification.inputs[0], "fp16", "onnx_fp16").first
    modules = list(dict.fromkeys(m for n in fp32.graph.node if (m := node_module(n))))
    start = next((i for i, m in enumerate(modules) if first and (m + ".").startswith(first.module + ".")), 0)
    tolerance = ToleranceConfig.for_precision("fp16", build.spec.tolerances)
    reference = build.verification

    def passes(chosen: list[str]) -> bool:
        runner = _emulated_runner(fp32, block, nodes + nodes_of(fp32, chosen))
        return compare_runners(reference.reference, runner, reference.inputs, tolerance).passed

    candidates = modules[start:]
    return minimal_keep(candidates, passes) if candidates and passes(candidates) else []


def check_dynamic_axes(proto: onnx.ModelProto, io: IOSpec) -> None:
    """ExportError if an axis the spec calls dynamic has a fixed size in the ONNX graph's inputs or outputs."""
    graph_dims = {value.name: value.type.tensor_type.shape.dim for value in (*proto.graph.input, *proto.graph.output)}
    baked = []
    for tensor in (*io.inputs, *io.outputs):
        dims = graph_dims.get(tensor.name)
        if dims is None:
            raise ExportError(f"the ONNX graph has no input/output named {tensor.name!r}")
        for index, axis in tensor.dynamic_axes.items():
            if index < len(dims) and dims[index].HasField("dim_value"):
                baked.append(f"{tensor.name}[{index}] ({axis}) = {dims[index].dim_value}")
    if baked:
        raise ExportError(
            f"the exporter baked dynamic axes into fixed sizes: {', '.join(baked)}",
            hint="the model's code specialises on that size; try --exporter legacy or fix the model",
            details={"baked_axes": baked},
        )


def float_io(io: IOSpec, dtype: str, *, inputs: bool, outputs: bool) -> IOSpec:
    """The same I/O with float inputs and/or outputs switched to `dtype` (an fp16 artifact's own I/O)."""

    def switch(specs: Sequence[TensorSpec], on: bool) -> tuple[TensorSpec, ...]:
        return tuple(t.with_dtype(dtype) if on and t.dtype.startswith("float") else t for t in specs)

    return IOSpec(switch(io.inputs, inputs), switch(io.outputs, outputs))


def _move_into_place(staging: Path, dest: Path, force: bool) -> None:
    """Rename the finished staging folder to `dest` with one journaled commit (contract.staging); with `force`, an
    existing export is moved aside in the same commit and deleted once the new one is in place."""
    if dest.exists() and not force:
        refuse_existing(dest, force)
    plan = Plan(staging_folder(dest.parent, dest.name, "replaced"))
    if dest.exists():
        plan.remove(dest)
    plan.new(staging, dest)
    try:
        commit(plan, _unmovable)
    finally:
        shutil.rmtree(plan.folder, ignore_errors=True)


def _unmovable(path: Path, exc: OSError) -> ExportError:
    return os_failure(ExportError, exc, f"{path}: cannot move the export into place", "check the folder's permissions")
