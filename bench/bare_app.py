"""A bare FastAPI app: the baseline that bench/service_load.py runs beside dmlserve.

`POST /pad` takes the same JSON body as dmlserve's `/v1/execute` for a FLOAT32 CONSTANT
PADDING and does the same NumPy work (parse the JSON list, pad, return a JSON list) with no
validation, limits, queueing, metrics or thread offload: the cost of FastAPI + uvicorn + the
work itself. `POST /models/pad/execute` does the same for a body without the operator, as
dmlserve's `/v1/operators/{name}/execute` takes it. `POST /echo` returns the request body as it
came: the cost of moving the bytes.

    uvicorn --app-dir bench bare_app:app --host 127.0.0.1 --port 8100
"""

from __future__ import annotations

import numpy as np
import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

app = FastAPI(title="bare baseline", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


#: The operator `/models/pad/execute` runs: the request names none, as with a registered one.
REGISTERED_PAD = {
    "type": "PADDING",
    "PaddingMode": "CONSTANT",
    "PaddingValue": 0.5,
    "StartPadding": [0, 0, 1, 1],
    "EndPadding": [0, 0, 1, 1],
}


@app.post("/pad")
async def pad(request: Request) -> Response:
    req = orjson.loads(await request.body())
    return _padded(req["operator"], req["inputs"]["InputTensor"])


@app.post("/models/pad/execute")
async def pad_registered(request: Request) -> Response:
    req = orjson.loads(await request.body())
    return _padded(REGISTERED_PAD, req["inputs"]["InputTensor"])


def _padded(op: dict, tensor: dict) -> Response:
    x = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["Sizes"])
    widths = list(zip(op["StartPadding"], op["EndPadding"], strict=True))
    y = np.pad(x, widths, mode="constant", constant_values=np.float32(op.get("PaddingValue", 0)))
    out = {"DataType": "FLOAT32", "Sizes": list(y.shape), "data": y.ravel().tolist()}
    body = {"outputs": {"OutputTensor": out}, "backend": "numpy"}
    return Response(orjson.dumps(body), media_type="application/json")


@app.post("/echo")
async def echo(request: Request) -> Response:
    body = await request.body()
    headers = {}
    if "inference-header-content-length" in request.headers:
        headers["inference-header-content-length"] = request.headers[
            "inference-header-content-length"
        ]
    return Response(body, media_type="application/octet-stream", headers=headers)
