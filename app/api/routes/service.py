"""Service endpoints: liveness, readiness, metrics."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["service"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}
