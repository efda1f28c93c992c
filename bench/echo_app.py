"""The comparator of ``POST /v1/prepare`` in ``bench/prepare.py``: a bare FastAPI endpoint that
parses the same body with the same pydantic model and echoes it (FastAPI's own body reading,
validation and response serialization; nothing else). Run by uvicorn in its own process."""

from __future__ import annotations

from fastapi import FastAPI

from app.api.schemas.prepare import PrepareBody

app = FastAPI()


@app.post("/echo")
async def echo(body: PrepareBody) -> PrepareBody:
    return body


@app.get("/readyz")
async def ready() -> dict[str, str]:
    return {"status": "ready"}
