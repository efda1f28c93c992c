"""The service's ASGI app (settings from the environment, as ``app.main:app``) plus one route
that fails the way a bug does: for tests of the 500 path in a real server process."""

from __future__ import annotations

from app.main import create_app

app = create_app()


@app.get("/v1/test-bug")
async def bug() -> None:
    raise RuntimeError("a bug the handlers do not know")
