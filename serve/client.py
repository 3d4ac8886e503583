"""The one Triton client of the project, for both protocols: inference (checked requests, binary tensors,
concurrency), model metadata, and the repository API (index, config, load, unload) behind the server's secret.

    with TritonClient("http://127.0.0.1:8000") as client:          # or "grpc://127.0.0.1:8001"
        info = client.model("digits_onnx")                         # metadata + config (preprocess, labels, ...)
        outputs = client.infer("digits_onnx", {"image": batch})    # {output name: array}
        many = client.infer_many("digits_onnx", [{"image": b} for b in batches])  # concurrent requests

Constructing a client changes nothing outside it: no allocator or other process-wide setting (docs/serving.md says
what a script sending large requests from its main thread can set for its own process).

Every failure a user can cause is a ClientError with a one-line message: server down, unknown model, missing or
unexpected input, wrong dtype, wrong shape, batch over max_batch_size, a refused repository request. Inputs are
checked against the model's metadata before anything is sent. No torch here: tritonclient and numpy only. The
server manager (serve.server), the supervisor, the rollout and every command talk to Triton through this class.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import gevent
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from modelship.contract.errors import ClientError
from modelship.contract.json_object import JsonObject
from modelship.contract.tensors import Tensors
from modelship.serve.model_info import ModelInfo, ModelState
from modelship.serve.protocols import DEFAULT_URLS, WireProtocol
from modelship.serve.restricted_api import secret_headers

PROTOCOLS = tuple(WireProtocol)
UNLOAD_TIMEOUT_S = 10.0  # how long a reload waits for Triton's background unload before it loads
UNLOAD_POLL_S = 0.05


def split_url(url: str | None, protocol: WireProtocol | None = None) -> tuple[WireProtocol, str]:
    """(protocol, "host:port") from "http://h:p", "grpc://h:p" or a bare "h:p" (`protocol`, else http)."""
    scheme, _, rest = (url or "").rpartition("://")
    if scheme and scheme not in PROTOCOLS:
        raise ClientError(
            f"unsupported URL scheme {scheme!r} in {url!r}", hint="use http://HOST:PORT or grpc://HOST:PORT"
        )
    if scheme and protocol and scheme != protocol:
        raise ClientError(f"URL {url!r} says {scheme}, but --protocol says {protocol}")
    chosen = WireProtocol(scheme) if scheme else protocol or WireProtocol.HTTP
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


class TritonClient:
    """Sync client over HTTP or gRPC (`url` scheme or `protocol`); `infer_many` sends requests concurrently.
    `api_key`: the server's restricted-API secret, sent with repository requests (None: that API is open)."""

    def __init__(
        self,
        url: str | None = None,
        protocol: WireProtocol | None = None,
        *,
        timeout_s: float = 60.0,
        concurrency: int = 4,
        api_key: str | None = None,
    ) -> None:
        self.protocol, self.address = split_url(url, protocol)
        self.url = f"{self.protocol}://{self.address}"
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self._headers = secret_headers(api_key, self.protocol) or None
        if self.protocol is WireProtocol.HTTP:
            self._client: Any = httpclient.InferenceServerClient(
                self.address, concurrency=concurrency, connection_timeout=timeout_s, network_timeout=timeout_s
            )
            # an async request that fails is raised again by its get_result(), as a ClientError; gevent's hub would
            # also print the greenlet's traceback on stderr
            gevent.get_hub().exception_stream = None
        else:
            self._client = grpcclient.InferenceServerClient(self.address)
        self._models: dict[tuple[str, str], ModelInfo] = {}

    # -- server ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, model: str | None = None, doing: str = "request") -> Iterator[None]:
        """Turn transport and server errors into ClientErrors that say what to do."""
        try:
            yield
        except TimeoutError:  # the server is up and took the request, but did not answer in time
            raise self._timed_out(model, doing) from None
        except (ConnectionError, OSError, http.client.HTTPException) as exc:  # refused, reset, closed mid-answer
            raise self._down(exc) from None
        except InferenceServerException as exc:
            text = f"{exc.message() or ''} {exc.status() or ''}"
            if "DEADLINE_EXCEEDED" in text or "Deadline Exceeded" in text:
                raise self._timed_out(model, doing) from None
            refused = text.startswith("load failed")  # a model Triton would not load: "... at UNAVAILABLE state"
            if not refused and ("UNAVAILABLE" in text or "failed to connect" in text.lower()):
                raise self._down(exc) from None
            if model and ("unknown model" in text.lower() or "not found" in text.lower()):
                raise self._unknown(model) from None
            raise ClientError(
                f"{self.url}: {doing} failed: {exc.message() or exc}", details={"url": self.url, "model": model}
            ) from None

    def _down(self, exc: Exception) -> ClientError:
        return ClientError(
            f"cannot reach a Triton server at {self.url} ({type(exc).__name__})",
            hint="start one with `modelship serve`, or pass --url",
            details={"url": self.url, "unreachable": True},
        )

    def _deadline(self) -> dict[str, float]:
        """gRPC's per-call timeout (without it a server that takes a call and never answers holds the client for
        good); HTTP's is the connection's network_timeout."""
        return {"client_timeout": self.timeout_s} if self.protocol is WireProtocol.GRPC else {}

    def _timed_out(self, model: str | None, doing: str) -> ClientError:
        return ClientError(
            f"{self.url}: {doing}{f' to {model}' if model else ''} timed out after {self.timeout_s:g} s",
            hint="the server is up but did not answer in time: send fewer or smaller inputs per request",
            details={"url": self.url, "model": model, "timed_out": True},
        )

    def _unknown(self, model: str) -> ClientError:
        try:
            served = [m.name for m in self.repository_index() if m.ready]
        except ClientError:  # the repository index may be restricted (modelship serve puts it behind a secret)
            served = []
        return ClientError(
            f"model {model!r} is not served at {self.url}",
            hint=f"served models: {', '.join(served)}" if served else "check the name (modelship serve lists them)",
            details={"url": self.url, "model": model, "served": served},
        )

    def live(self) -> bool:
        """True if the server answers; False (no exception) if nothing is listening."""
        return self._probe(self._client.is_server_live)

    def ready(self) -> bool:
        """True once the server is ready (every model it was asked to load has loaded); False if not, or down."""
        return self._probe(self._client.is_server_ready)

    @staticmethod
    def _probe(call: Any) -> bool:
        try:
            return bool(call())
        except (ConnectionError, OSError, http.client.HTTPException, InferenceServerException):
            return False

    def server_name(self) -> str:
        """What the server calls itself ("triton" for Triton), from its metadata."""
        with self._errors(doing="server metadata"):
            metadata = self._client.get_server_metadata()
        return metadata.name if self.protocol is WireProtocol.GRPC else metadata.get("name", "")

    # -- repository (behind the secret) ------------------------------------------------------------------------
    def repository_index(self) -> list[ModelState]:
        """Every model of the repository with its state and, for one that failed, Triton's reason."""
        with self._errors(doing="repository index"):
            index = self._client.get_model_repository_index(headers=self._headers)
        entries = [{"name": m.name, "version": m.version, "state": m.state, "reason": m.reason} for m in index.models] \
            if self.protocol is WireProtocol.GRPC else index  # fmt: skip
        return [
            ModelState(e["name"], str(e.get("version", "")), e.get("state", ""), e.get("reason", "")) for e in entries
        ]

    def model_config(self, name: str) -> JsonObject:
        """The config `name` is served with, as Triton's JSON (what `load` takes back)."""
        with self._errors(name, "reading the config"):
            if self.protocol is WireProtocol.GRPC:
                return self._client.get_model_config(name, headers=self._headers, as_json=True, **self._deadline())[
                    "config"
                ]
            return self._client.get_model_config(name, headers=self._headers)

    def load(self, name: str, config: JsonObject | None = None) -> None:
        """Load (or reload) `name`, with `config` when given (e.g. a version policy), else the repository's."""
        with self._errors(doing=f"loading {name}"):
            self._client.load_model(name, headers=self._headers, config=json.dumps(config) if config else None)

    def unload(self, name: str) -> None:
        with self._errors(doing=f"unloading {name}"):
            self._client.unload_model(name, headers=self._headers)

    def reload(self, name: str, config: JsonObject | None = None, unload_timeout_s: float = UNLOAD_TIMEOUT_S) -> None:
        """Unload then load `name` (its readiness is false in between), with `config` as `load` takes it. Triton
        unloads in the background: the load waits until `name` has left READY (at most `unload_timeout_s`), else
        Triton takes it for a load over the served model, which keeps answering READY meanwhile."""
        self.unload(name)
        deadline = time.monotonic() + unload_timeout_s
        while self.model_ready(name) and time.monotonic() < deadline:
            time.sleep(UNLOAD_POLL_S)
        self.load(name, config)

    def model_ready(self, name: str, version: str = "") -> bool:
        """Whether `version` of `name` (any version: "") is loaded and ready; ClientError if the server is down."""
        with self._errors(doing=f"readiness of {name}"):
            return bool(self._client.is_model_ready(name, version, headers=self._headers, **self._deadline()))

    # -- models ------------------------------------------------------------------------------------------------
    def model(self, name: str, version: str = "") -> ModelInfo:
        """Metadata and config of a served model (cached); ClientError if the server does not serve it."""
        key = (name, version)
        if key not in self._models:
            with self._errors(name):
                if not self._client.is_model_ready(name, version, **self._deadline()):
                    raise self._unknown(name)
                if self.protocol is WireProtocol.GRPC:
                    meta = self._client.get_model_metadata(name, version, as_json=True, **self._deadline())
                    config = self._client.get_model_config(name, version, as_json=True, **self._deadline())["config"]
                else:
                    meta = self._client.get_model_metadata(name, version)
                    config = self._client.get_model_config(name, version)
            self._models[key] = ModelInfo.from_server(name, meta, config)
        return self._models[key]

    # -- inference ---------------------------------------------------------------------------------------------
    def _request(self, name: str, inputs: Tensors, outputs: Sequence[str] | None, version: str) -> tuple[list, list]:
        info = self.model(name, version)
        info.check_inputs(inputs)
        known = [t.name for t in info.outputs]
        wanted = list(outputs) if outputs else known
        unknown = [o for o in wanted if o not in known]
        if unknown:
            raise ClientError(f"model {name!r} has no output {unknown[0]!r}", hint=f"outputs: {', '.join(known)}")
        lib = httpclient if self.protocol is WireProtocol.HTTP else grpcclient
        infer_inputs = []
        for spec in info.inputs:
            entry = lib.InferInput(spec.name, list(inputs[spec.name].shape), spec.datatype)
            if self.protocol is WireProtocol.HTTP:
                entry.set_data_from_numpy(np.ascontiguousarray(inputs[spec.name]), binary_data=True)
            else:
                entry.set_data_from_numpy(np.ascontiguousarray(inputs[spec.name]))
            infer_inputs.append(entry)
        if self.protocol is WireProtocol.HTTP:
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
            if self.protocol is WireProtocol.HTTP:
                result = self._client.infer(name, infer_inputs, model_version=version, outputs=requested)
            else:
                result = self._client.infer(
                    name, infer_inputs, model_version=version, outputs=requested, **self._deadline()
                )
        return self._result(result, requested)

    def infer_many(
        self, name: str, requests: Sequence[Tensors], outputs: Sequence[str] | None = None, version: str = ""
    ) -> list[Tensors]:
        """Send all `requests` at once (the server's dynamic batcher may merge them); results in request order."""
        prepared = [self._request(name, inputs, outputs, version) for inputs in requests]
        with self._errors(name):
            if self.protocol is WireProtocol.HTTP:
                handles = [
                    self._client.async_infer(name, inputs, model_version=version, outputs=requested)
                    for inputs, requested in prepared
                ]
                return [
                    self._result(h.get_result(), requested) for h, (_, requested) in zip(handles, prepared, strict=True)
                ]
            futures: list[concurrent.futures.Future[grpcclient.InferResult]] = [
                concurrent.futures.Future() for _ in prepared
            ]
            for future, (inputs, requested) in zip(futures, prepared, strict=True):
                self._client.async_infer(
                    name,
                    inputs,
                    callback=_settle(future),
                    model_version=version,
                    outputs=requested,
                    **self._deadline(),
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
