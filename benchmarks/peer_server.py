"""The do-it-yourself peer: what a user writes instead of Triton, FastAPI + uvicorn around an ONNX Runtime session.

`python -m modelship.bench.peer_server MODEL.onnx PORT THREADS` serves POST /infer (an .npz of the inputs in, an .npz of
the outputs out) and GET /health on 127.0.0.1, one uvicorn worker, the session made as the in-process baseline's
(`inprocess_worker.make_session`), inference in FastAPI's thread pool so concurrent requests overlap. A bench-only
extra (`pip install modelship[bench]`); started and stopped by the bench (`peer.PeerServer`).
"""

import io
import sys
from typing import TYPE_CHECKING

import numpy as np

from modelship.bench.inprocess_worker import make_session

if TYPE_CHECKING:  # the bench extra: imported only when the peer runs
    from fastapi import FastAPI


def create_app(model: str, threads: int) -> "FastAPI":  # evaluated here: FastAPI reads the handlers' annotations
    from fastapi import FastAPI, Request, Response
    from starlette.concurrency import run_in_threadpool

    session = make_session(model, threads, [])
    names = [o.name for o in session.get_outputs()]
    app = FastAPI()

    def run(body: bytes) -> bytes:
        with np.load(io.BytesIO(body)) as data:
            inputs = {name: data[name] for name in data.files}
        buffer = io.BytesIO()
        np.savez(buffer, **dict(zip(names, session.run(None, inputs), strict=True)))
        return buffer.getvalue()

    @app.get("/health")
    def health() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/infer")
    async def infer(request: Request) -> Response:
        return Response(await run_in_threadpool(run, await request.body()), media_type="application/octet-stream")

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(sys.argv[1], int(sys.argv[3])), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
