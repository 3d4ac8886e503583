"""What `measure.InProcess` asks its worker (`inprocess_worker`) and what the worker answers: one request, then its
reply, each one JSON object a line on the worker's stdin and stdout. Both are dataclasses; they become JSON only at
the pipe (`request_line` / `read_request`, `reply_line` / `read_reply`). Imports neither torch nor onnxruntime: the
bench process and the worker both read it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modelship.contract.json_object import JsonObject
from modelship.contract.preprocessing import PreprocessSpec
from modelship.contract.tokenizer import TokenizerSource, TokenizerSpec
from modelship.serve.load.stats import LoadStats


@dataclass(frozen=True)
class Open:
    """Open the model at `path` with `threads` intra-op threads: an ONNX file in the session the server's
    onnxruntime backend makes (`disabled_optimizers`; with `tokenizer`, a text model whose requests are texts), or,
    with `torchscript_output`, a TorchScript module answering that output (the worker then imports torch)."""

    path: str
    threads: int
    disabled_optimizers: list[str] = field(default_factory=list)
    tokenizer: TokenizerSource | None = None
    torchscript_output: str | None = None

    def to_dict(self) -> JsonObject:
        source = self.tokenizer
        tokenizer = None if source is None else {"path": str(source.path), "spec": source.spec.to_dict()}
        return {**asdict(self), "tokenizer": tokenizer}

    @classmethod
    def from_dict(cls, data: JsonObject) -> Open:
        source = data["tokenizer"]
        tokenizer = (
            None if source is None else TokenizerSource(Path(source["path"]), TokenizerSpec.from_dict(source["spec"]))
        )
        return cls(**{**data, "tokenizer": tokenizer})


@dataclass(frozen=True)
class Image:
    """From now on a request is an image pipeline's work: decode the encoded image in the file `image`, preprocess
    it by `preprocess`, run the model, then (`mask`) its class mask at the image's size."""

    image: str
    preprocess: PreprocessSpec
    mask: bool

    def to_dict(self) -> JsonObject:
        return {**asdict(self), "preprocess": self.preprocess.to_dict()}

    @classmethod
    def from_dict(cls, data: JsonObject) -> Image:
        return cls(**{**data, "preprocess": PreprocessSpec.from_dict(data["preprocess"])})


@dataclass(frozen=True)
class Outputs:
    """Run one request and save its outputs to the file `out`: the inputs in the .npz file `inputs` (every output,
    .npz), or with `image` the image pipeline's request (its output, .npy)."""

    out: str
    inputs: str | None = None
    image: bool = False

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> Outputs:
        return cls(**data)


@dataclass(frozen=True)
class Window:
    """How long a measurement runs: an untimed warmup of `warmup_s`, then `window_s` or `max_requests` requests,
    whichever ends first."""

    window_s: float
    warmup_s: float
    max_requests: int


@dataclass(frozen=True)
class Measure:
    """Measure requests `concurrency` at a time over `window`: the inputs in the .npz file `inputs`, `texts`
    tokenized per request (a model opened with a tokenizer), or with `image` the image pipeline's request."""

    concurrency: int
    window: Window
    inputs: str | None = None
    texts: list[str] | None = None
    image: bool = False

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> Measure:
        return cls(**{**data, "window": Window(**data["window"])})


Request = Open | Image | Outputs | Measure
OPS: dict[str, type[Request]] = {"open": Open, "image": Image, "outputs": Outputs, "measure": Measure}


def request_line(request: Request) -> str:
    """`request` as its line on the pipe: its op (OPS) and its fields."""
    op = next(op for op, kind in OPS.items() if isinstance(request, kind))
    return json.dumps({"op": op, **request.to_dict()}) + "\n"


def read_request(line: str) -> Request:
    """The request of a line `request_line` wrote."""
    data: JsonObject = json.loads(line)
    op = data.pop("op")
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}")
    return OPS[op].from_dict(data)


@dataclass(frozen=True)
class Reply:
    """The worker's answer to one request: `error` when it failed (every failure is an answer), else `torch` to
    Open (whether the worker has imported torch) and `stats` to Measure (what the load generator measured)."""

    error: str | None = None
    torch: bool | None = None
    stats: LoadStats | None = None

    def to_dict(self) -> JsonObject:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> Reply:
        stats = data["stats"]
        return cls(**{**data, "stats": None if stats is None else LoadStats(**stats)})


def reply_line(reply: Reply) -> str:
    """`reply` as its line on the pipe."""
    return json.dumps(reply.to_dict()) + "\n"


def read_reply(line: str) -> Reply:
    """The reply of a line `reply_line` wrote."""
    return Reply.from_dict(json.loads(line))
