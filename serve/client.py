"""A small Triton client for both protocols: model metadata, checked requests, binary tensors, concurrency.

    with TritonClient("http://127.0.0.1:8000") as client:          # or "grpc://127.0.0.1:8001"
        info = client.model("digits_onnx")                         # metadata + config (preprocess, labels, ...)
        outputs = client.infer("digits_onnx", {"image": batch})    # {output name: array}
        many = client.infer_many("digits_onnx", [{"image": b} for b in batches])  # concurrent requests

Every failure a user can cause is a ClientError with a one-line message: server down, unknown model, missing or
unexpected input, wrong dtype, wrong shape, batch over max_batch_size. Inputs are checked against the model's
metadata before anything is sent. No torch here: tritonclient and numpy only.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

from modelship.contract.errors import ClientError, PreprocessError
from modelship.contract.iospec import ServedNames
from modelship.contract.preprocessing import PreprocessSpec
from modelship.serve.triton_config import PARAM_EXPORT, PARAM_IO, PARAM_LABELS, PARAM_PREPROCESS

PROTOCOLS = ("http", "grpc")
DEFAULT_URLS = {"http": "127.0.0.1:8000", "grpc": "127.0.0.1:8001"}
Tensors = dict[str, np.ndarray]


def split_url(url: str | None, protocol: str | None = None) -> tuple[str, str]:
    """(protocol, "host:port") from "http://h:p", "grpc://h:p" or a bare "h:p" (protocol defaults to http)."""
    scheme, _, rest = (url or "").rpartition("://")
    if scheme and scheme not in PROTOCOLS:
        raise ClientError(
            f"unsupported URL scheme {scheme!r} in {url!r}", hint="use http://HOST:PORT or grpc://HOST:PORT"
        )
    if scheme and protocol and scheme != protocol:
        raise ClientError(f"URL {url!r} says {scheme}, but --protocol says {protocol}")
    chosen = scheme or protocol or "http"
    if chosen not in PROTOCOLS:
        raise ClientError(f"unknown protocol {chosen!r}", hint="use http or grpc")
    if url is None:
        return chosen, DEFAULT_URLS[chosen]
    address = rest.rstrip("/")
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, DEFAULT_URLS[chosen].rpartition(":")[2]
    if not host or "/" in address or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClientError(
            f"{url!r} is not a server address",
            hint=f"write {chosen}://HOST:PORT, e.g. {chosen}://{DEFAULT_URLS[chosen]}",
        )
    return chosen, f"{host}:{port}"


@dataclass(frozen=True)
class TensorInfo:
    """One input or output as the server declares it; `shape` includes the batch dim (-1) for batched models."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(triton_to_np_dtype(self.datatype))


@dataclass(frozen=True)
class ModelInfo:
    """A served model's metadata and config, including what modelship publishes in config `parameters`."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    max_batch_size: int
    parameters: dict[str, str] = field(default_factory=dict)

    def _json(self, key: str) -> Any:
        return json.loads(self.parameters[key]) if key in self.parameters else None

    @property
    def preprocess(self) -> PreprocessSpec | None:
        """The preprocessing spec published with the model, checked (ClientError when it is not one)."""
        data = self._json(PARAM_PREPROCESS)
        if data is None:
            return None
        try:
            return PreprocessSpec.from_dict(data)
        except PreprocessError as exc:
            raise ClientError(
                f"model {self.name!r} publishes an invalid preprocessing spec: {exc.message}",
                hint="republish it with `modelship publish`",
            ) from None

    @property
    def labels(self) -> list[str] | None:
        return self._json(PARAM_LABELS)

    @property
    def export_info(self) -> dict[str, Any] | None:
        return self._json(PARAM_EXPORT)

    @property
    def io_names(self) -> ServedNames:
        """Served names mapped to the export's (publish wrote them); identity for models not from modelship."""
        data = self._json(PARAM_IO)
        if not data:
            return ServedNames.identity([t.name for t in self.inputs], [t.name for t in self.outputs])
        try:
            return ServedNames.from_dict(data)
        except ValueError as exc:
            raise ClientError(f"model {self.name!r}: config parameter {PARAM_IO!r} is not a name map ({exc})") from None

    def input(self, name: str) -> TensorInfo:
        return next(t for t in self.inputs if t.name == name)


class TritonClient:
    """Sync client over HTTP or gRPC (`url` scheme or `protocol`); `infer_many` sends requests concurrently."""

    def __init__(
        self, url: str | None = None, protocol: str | None = None, *, timeout_s: float = 60.0, concurrency: int = 4
    ) -> None:
        self.protocol, self.address = split_url(url, protocol)
        self.url = f"{self.protocol}://{self.address}"
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        if self.protocol == "http":
            self._client: Any = httpclient.InferenceServerClient(
                self.address, concurrency=concurrency, connection_timeout=timeout_s, network_timeout=timeout_s
            )
        else:
            self._client = grpcclient.InferenceServerClient(self.address)
        self._models: dict[tuple[str, str], ModelInfo] = {}

    # -- server ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, model: str | None = None) -> Iterator[None]:
        """Turn transport and server errors into ClientErrors that say what to do."""
        try:
            yield
        except (ConnectionError, OSError, http.client.HTTPException) as exc:  # refused, reset, closed mid-answer
            raise self._down(exc) from None
        except InferenceServerException as exc:
            text = f"{exc.message() or ''} {exc.status() or ''}"
            if "UNAVAILABLE" in text or "failed to connect" in text.lower():
                raise self._down(exc) from None
            if model and ("unknown model" in text.lower() or "not found" in text.lower()):
                raise self._unknown(model) from None
            raise ClientError(
                f"{self.url}: request failed: {exc.message() or exc}", details={"url": self.url, "model": model}
            ) from None

    def _down(self, exc: Exception) -> ClientError:
        return ClientError(
            f"cannot reach a Triton server at {self.url} ({type(exc).__name__})",
            hint="start one with `modelship serve`, or pass --url",
            details={"url": self.url},
        )

    def _unknown(self, model: str) -> ClientError:
        try:
            served = [m["name"] for m in self.models() if m.get("state") == "READY"]
        except ClientError:  # the repository index may be restricted (modelship serve puts it behind a secret)
            served = []
        return ClientError(
            f"model {model!r} is not served at {self.url}",
            hint=f"served models: {', '.join(served)}" if served else "check the name (modelship serve lists them)",
            details={"url": self.url, "model": model, "served": served},
        )

    def live(self) -> bool:
        """True if the server answers; False (no exception) if nothing is listening."""
        try:
            return bool(self._client.is_server_live())
        except (ConnectionError, OSError, InferenceServerException):
            return False

    def models(self) -> list[dict[str, Any]]:
        """The repository index: [{"name", "version", "state"}...]."""
        with self._errors():
            index = self._client.get_model_repository_index()
        if self.protocol == "grpc":
            return [{"name": m.name, "version": m.version, "state": m.state} for m in index.models]
        return index

    # -- models ------------------------------------------------------------------------------------------------
    def model(self, name: str, version: str = "") -> ModelInfo:
        """Metadata and config of a served model (cached); ClientError if the server does not serve it."""
        key = (name, version)
        if key not in self._models:
            with self._errors(name):
                if not self._client.is_model_ready(name, version):
                    raise self._unknown(name)
                if self.protocol == "grpc":
                    meta = self._client.get_model_metadata(name, version, as_json=True)
                    config = self._client.get_model_config(name, version, as_json=True)["config"]
                else:
                    meta = self._client.get_model_metadata(name, version)
                    config = self._client.get_model_config(name, version)
            self._models[key] = ModelInfo(
                name=name,
                versions=tuple(meta.get("versions", [])),
                platform=meta.get("platform", ""),
                inputs=tuple(_tensor_info(t) for t in meta.get("inputs", [])),
                outputs=tuple(_tensor_info(t) for t in meta.get("outputs", [])),
                max_batch_size=int(config.get("max_batch_size", 0)),
                parameters={k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()},
            )
        return self._models[key]

    def check_inputs(self, info: ModelInfo, inputs: Tensors) -> None:
        """ClientError unless `inputs` match the model's declared names, dtypes and shapes (and batch limit)."""
        expected = {t.name for t in info.inputs}
        problems = []
        if expected - set(inputs):
            problems.append(f"missing inputs {sorted(expected - set(inputs))}")
        if set(inputs) - expected:
            problems.append(f"unexpected inputs {sorted(set(inputs) - expected)}")
        if problems:
            raise ClientError(
                f"model {info.name!r}: {'; '.join(problems)}",
                hint=f"inputs: {', '.join(f'{t.name} {t.datatype} {list(t.shape)}' for t in info.inputs)}",
            )
        batches = set()
        for spec in info.inputs:
            array = inputs[spec.name]
            if not isinstance(array, np.ndarray):
                raise ClientError(f"model {info.name!r}: input {spec.name!r} is a {type(array).__name__}, not an array")
            if array.dtype != spec.dtype:
                raise ClientError(
                    f"model {info.name!r}: input {spec.name!r} is {array.dtype}, the model takes {spec.datatype}",
                    hint=f"cast it: array.astype(np.{spec.dtype})",
                )
            if not _fits(array.shape, spec.shape):
                raise ClientError(
                    f"model {info.name!r}: input {spec.name!r} has shape {list(array.shape)}, "
                    f"the model takes {list(spec.shape)} (-1: any size)",
                    hint="the first dim is the batch" if info.max_batch_size else None,
                )
            if info.max_batch_size:
                batches.add(array.shape[0])
        if len(batches) > 1:
            raise ClientError(f"model {info.name!r}: inputs disagree on the batch size: {sorted(batches)}")
        if batches and max(batches) > info.max_batch_size:
            raise ClientError(
                f"model {info.name!r}: batch of {max(batches)} is over its max_batch_size {info.max_batch_size}",
                hint="split the batch (modelship infer --batch N)",
            )

    # -- inference ---------------------------------------------------------------------------------------------
    def _request(self, name: str, inputs: Tensors, outputs: Sequence[str] | None, version: str) -> tuple[list, list]:
        info = self.model(name, version)
        self.check_inputs(info, inputs)
        known = [t.name for t in info.outputs]
        wanted = list(outputs) if outputs else known
        unknown = [o for o in wanted if o not in known]
        if unknown:
            raise ClientError(f"model {name!r} has no output {unknown[0]!r}", hint=f"outputs: {', '.join(known)}")
        lib = httpclient if self.protocol == "http" else grpcclient
        infer_inputs = []
        for spec in info.inputs:
            entry = lib.InferInput(spec.name, list(inputs[spec.name].shape), spec.datatype)
            if self.protocol == "http":
                entry.set_data_from_numpy(np.ascontiguousarray(inputs[spec.name]), binary_data=True)
            else:
                entry.set_data_from_numpy(np.ascontiguousarray(inputs[spec.name]))
            infer_inputs.append(entry)
        if self.protocol == "http":
            requested = [lib.InferRequestedOutput(o, binary_data=True) for o in wanted]
        else:
            requested = [lib.InferRequestedOutput(o) for o in wanted]
        return infer_inputs, requested

    @staticmethod
    def _result(result: Any, requested: list) -> Tensors:
        return {out.name(): result.as_numpy(out.name()) for out in requested}

    def infer(self, name: str, inputs: Tensors, outputs: Sequence[str] | None = None, version: str = "") -> Tensors:
        """One checked request; returns {served output name: array}."""
        infer_inputs, requested = self._request(name, inputs, outputs, version)
        with self._errors(name):
            if self.protocol == "http":
                result = self._client.infer(name, infer_inputs, model_version=version, outputs=requested)
            else:
                result = self._client.infer(
                    name, infer_inputs, model_version=version, outputs=requested, client_timeout=self.timeout_s
                )
        return self._result(result, requested)

    def infer_many(
        self, name: str, requests: Sequence[Tensors], outputs: Sequence[str] | None = None, version: str = ""
    ) -> list[Tensors]:
        """Send all `requests` at once (the server's dynamic batcher may merge them); results in request order."""
        prepared = [self._request(name, inputs, outputs, version) for inputs in requests]
        with self._errors(name):
            if self.protocol == "http":
                handles = [
                    self._client.async_infer(name, inputs, model_version=version, outputs=requested)
                    for inputs, requested in prepared
                ]
                return [
                    self._result(h.get_result(), requested) for h, (_, requested) in zip(handles, prepared, strict=True)
                ]
            futures = [concurrent.futures.Future() for _ in prepared]
            for future, (inputs, requested) in zip(futures, prepared, strict=True):
                self._client.async_infer(
                    name,
                    inputs,
                    callback=_settle(future),
                    model_version=version,
                    outputs=requested,
                    client_timeout=self.timeout_s,
                )
            return [self._result(f.result(), requested) for f, (_, requested) in zip(futures, prepared, strict=True)]

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settle(future: concurrent.futures.Future) -> Any:
    def callback(result: Any, error: Exception | None) -> None:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    return callback


def _fits(shape: tuple[int, ...], declared: tuple[int, ...]) -> bool:
    """`shape` matches `declared` (where -1 is any size)."""
    return len(shape) == len(declared) and all(d in (-1, n) for d, n in zip(declared, shape, strict=True))


def _tensor_info(meta: dict[str, Any]) -> TensorInfo:
    return TensorInfo(meta["name"], meta["datatype"], tuple(int(d) for d in meta.get("shape", [])))
