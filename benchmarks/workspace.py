"""What the suites share within one run: benchmark models, their checkpoints and exports, and the plan.

Models are random-weight torchvision/timm networks made realistic (`testing.realistic.make_realistic`), saved as
checkpoints, loaded back through the project's loader and exported once through the project's pipeline; every
suite reuses those exports. The plan (`BenchPlan.full()` / `BenchPlan.quick_plan()`) sizes everything in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelship.bench.repeated import Repetition
from modelship.contract.manifest import Manifest, StepTiming
from modelship.contract.tensors import Tensors
from modelship.serve.load.requests import Variant, parse_protocol
from modelship.serve.protocols import WireProtocol


@dataclass(frozen=True)
class BenchModel:
    """A benchmark model: `arch` as the loader names it, square input `resolution`; `serving_threads`: ONNX Runtime
    intra-op threads on both sides of the serving suite's comparisons (None: the publisher's default, cores per
    instance); `serving_rounds`: how many fresh server, worker and peer processes the serving suite spreads each of
    its points over."""

    key: str
    arch: str
    resolution: int = 224
    serving_threads: int | None = None
    serving_rounds: int = 1

    @property
    def input_option(self) -> str:
        return f"x:batch,3,{self.resolution},{self.resolution}"


MODELS = {
    m.key: m
    for m in (
        # 3x224x224 requests, little compute: per-request cost shows. One thread: a 1 ms inference with two threads
        # on two shared cores runs at one of two speeds, set per process (500 or 870 inf/s here), so its ratios
        # measured the host, not the serving path. Six rounds: even with one thread its speed is partly the
        # process's, so one server process per run made its c1 rows move 11-15% between runs (benchmarks/README.md,
        # "Lessons")
        BenchModel("small", "mobilenet_v3_small", serving_threads=1, serving_rounds=6),
        BenchModel("resnet50", "resnet50"),
    )
}


@dataclass(frozen=True)
class LoadProtocol:
    """How a point's requests travel: a wire protocol and how its tensors go, parsed once from the load generator's
    name (serve.load.requests.PROTOCOLS). It prints as that name ("grpc", "grpc-shm"), as the rows name it."""

    wire: WireProtocol
    variant: Variant = Variant.BINARY

    def __str__(self) -> str:
        return str(self.wire) if self.variant is Variant.BINARY else f"{self.wire}-{self.variant}"


def load_protocols(*names: str) -> tuple[LoadProtocol, ...]:
    """The load generator's protocol `names` ("grpc", "http-shm", ...) as LoadProtocols."""
    return tuple(LoadProtocol(*parse_protocol(name)) for name in names)


GRPC = LoadProtocol(WireProtocol.GRPC)  # binary tensors over gRPC


@dataclass(frozen=True)
class BenchPlan:
    """Sizes of one run. Durations are load windows in seconds; every measurement is bounded by time and count."""

    quick: bool
    serving_models: tuple[str, ...]
    batches: tuple[int, ...]
    concurrencies: dict[str, tuple[int, ...]]
    protocols: tuple[LoadProtocol, ...]
    window_s: float
    max_requests: int
    main_model: str  # the headline model: export, pipeline, perf_analyzer cross-check
    small_model: str  # transport, fleet, the pipeline suite's per-request breakdown
    peer_concurrencies: tuple[int, ...] = (1, 4)  # where modelship is compared with the peers
    rounds: int | None = None  # fresh-process rounds per serving model; None: the model's serving_rounds
    transport_batch: int = 8
    transport_protocols: tuple[LoadProtocol, ...] = load_protocols("grpc", "http", "grpc-shm", "http-shm")
    pa_window_ms: int = 3000
    repetition: Repetition = field(default_factory=Repetition)  # interleaved pairs per serving point
    # the baseline / standalone check: each standalone measurement is a fresh process, and the small model's pairs
    # spread 0.67-1.19 (2026-12-03); 16 pairs knew the median to ±2.7-3.5%, too coarse to judge a 5% bound
    baseline_repetition: Repetition = field(default_factory=lambda: Repetition(12, 36, 0.015))
    point_window_s: float = 1.0  # each side's window in one pair
    warmup_s: float = 0.25  # each side's untimed warmup before its window

    @classmethod
    def full(cls) -> BenchPlan:
        return cls(
            quick=False,
            serving_models=("resnet50", "small"),
            batches=(1, 8),
            concurrencies={"resnet50": (1, 2, 4, 8), "small": (1, 8)},
            protocols=load_protocols("grpc", "http"),
            window_s=4.0,
            max_requests=2000,
            main_model="resnet50",
            small_model="small",
        )

    @classmethod
    def quick_plan(cls) -> BenchPlan:
        """About 3 minutes on 2 idle cores: the small model over gRPC, each peer at concurrency 1, two rounds of
        fresh processes, 4 to 8 pairs a point; transport over system shared memory. Indicative, and enough to
        catch a move of 15% against a baseline on an idle machine (compare.py)."""
        return cls(
            quick=True,
            serving_models=("small",),
            batches=(1, 8),
            concurrencies={"small": (1, 4)},
            protocols=(GRPC,),
            window_s=1.0,
            max_requests=500,
            main_model="small",
            small_model="small",
            peer_concurrencies=(1,),
            rounds=2,
            transport_protocols=load_protocols("grpc-shm"),  # plain gRPC at batch 8: the serving suite's rows
            pa_window_ms=1000,
            repetition=Repetition(min_pairs=4, max_pairs=8, target=0.04),
            baseline_repetition=Repetition(min_pairs=4, max_pairs=10, target=0.03),
            point_window_s=0.5,
            warmup_s=0.15,
        )

    def rounds_for(self, key: str) -> int:
        """How many rounds of fresh processes the serving suite spreads `key`'s points over."""
        return MODELS[key].serving_rounds if self.rounds is None else min(self.rounds, MODELS[key].serving_rounds)


Log = Callable[[str], None]


@dataclass
class Export:
    """One exported model: its folder, manifest, pipeline step timings and the model itself (for bare calls)."""

    model: BenchModel
    folder: Path
    manifest: Manifest
    timings: list[StepTiming]
    seconds: float
    load_seconds: float
    eager: Any = field(repr=False)
    checkpoint: Path = field(repr=False, default=Path())

    def step_seconds(self, step: str) -> float:
        """Total seconds of the pipeline steps named `step` or `step` + " (...)" (e.g. a retried fp16 conversion)."""
        return sum(t.seconds for t in self.timings if t.step == step or t.step.startswith(step + " "))

    def artifact_path(self, name: str) -> Path:
        return self.folder / self.manifest.artifact(name).file

    @property
    def params_m(self) -> float:
        return sum(p.numel() for p in self.eager.parameters()) / 1e6


class Workspace:
    """Checkpoints, exports and model repositories of one run, under `root`, built on first use and cached."""

    def __init__(self, root: Path, plan: BenchPlan, log: Log = lambda _: None) -> None:
        self.root = Path(root)
        self.plan = plan
        self.log = log
        self._exports: dict[str, Export] = {}
        self._fp16: set[str] = set()

    def checkpoint(self, key: str) -> Path:
        """A realistic random-weight checkpoint (state dict) of `key`; the architecture is passed when loading."""
        import torch

        from modelship.checkpoint.arch import build_model
        from modelship.testing.realistic import make_realistic

        model = MODELS[key]
        path = self.root / "checkpoints" / f"{key}.pt"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            net = build_model(model.arch)
            example = torch.randn(4, 3, model.resolution, model.resolution, generator=torch.Generator().manual_seed(0))
            make_realistic(net, example)
            torch.save(net.state_dict(), path)
        return path

    def export(self, key: str, *, fp16: bool = False) -> Export:
        """Load `key`'s checkpoint with the project's loader and export TorchScript + ONNX (+ fp16) with its
        pipeline, timed; cached (an fp16 export also serves fp32-only requests)."""
        cached = self._exports.get(key)
        if cached is not None and (not fp16 or key in self._fp16):
            return cached
        from modelship.checkpoint import LoadOptions, load_model
        from modelship.export.loaded import export_loaded
        from modelship.export.spec import ExportSpec

        model = MODELS[key]
        checkpoint = self.checkpoint(key)
        self.log(f"exporting {key} ({model.arch}{', fp16' if fp16 else ''})")
        began = time.perf_counter()
        loaded = load_model(LoadOptions(checkpoint, arch=model.arch))
        load_seconds = time.perf_counter() - began
        spec = ExportSpec(
            self.root / "exports" / (key + ("_fp16" if fp16 else "")),
            precisions=("fp16",) if fp16 else (),
            input_options=(model.input_option,),
            force=True,
        )
        result = export_loaded(loaded, spec)
        seconds = time.perf_counter() - began
        export = Export(
            model=model,
            folder=result.folder,
            manifest=result.manifest,
            timings=list(result.timings),
            seconds=seconds,
            load_seconds=load_seconds,
            eager=loaded.model,
            checkpoint=checkpoint,
        )
        self._exports[key] = export
        if fp16:
            self._fp16.add(key)
        return export

    def repo(self, name: str) -> Path:
        """A fresh, empty model repository folder."""
        import shutil

        path = self.root / "repos" / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish(
        self, repo: Path, key: str, artifact: str = "onnx", *, name_suffix: str = "", max_batch_size: int | None = None
    ) -> str:
        """Publish one artifact of `key`'s export into `repo` (default serving options, or this max batch size);
        returns the Triton model name."""
        from modelship.serve.publish import publish_export
        from modelship.serve.triton_config import ServingOptions

        export = self.export(key)
        serving = ServingOptions() if max_batch_size is None else ServingOptions(max_batch_size=max_batch_size)
        name = key + name_suffix
        return publish_export(export.folder, repo, name=name, artifacts=[artifact], serving=serving).names[0]


def sample_inputs(export: Export, batch: int, seed: int = 0) -> Tensors:
    """Seeded float32 inputs for `export` at `batch` (the same arrays go to the server and to in-process ORT)."""
    from modelship.parity import random_inputs

    return random_inputs(export.manifest.io, {"batch": batch}, seed)
