"""Service endpoints: liveness, readiness, metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.auth import require_metrics_key
from app.api.deps import ContainerDep
from app.api.problems import problem_response
from app.api.responses import problems
from app.observability import metrics_text
from app.storage.migrate import is_at_head

router = APIRouter(tags=["service"])


@router.get("/healthz", responses=problems(secured=False))
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", responses=problems({503: ("not_ready",)}, secured=False))
async def readyz(container: ContainerDep) -> Response:
    """The database is reachable, migrated to the latest schema and takes writes (503
    otherwise)."""
    if not await is_at_head(container.engine):
        return problem_response(
            503,
            "not_ready",
            "the database is unreachable or not migrated to the latest schema; run `ctxsvc"
            " migrate`",
        )
    problem = container.outages.write_problem()
    if problem is None:
        return Response('{"status":"ready"}', media_type="application/json")
    return problem_response(
        503,
        "not_ready",
        f"the database takes no writes ({problem}): free space or make it writable",
    )


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[Depends(require_metrics_key)],
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format"},
        **problems(),
    },
)
async def metrics(container: ContainerDep) -> Response:
    """Prometheus text format: requests, turns, model calls, tokens, compactions, the process.

    Takes an API key when `CTXSVC_API_KEYS` is set, unless `CTXSVC_METRICS_PUBLIC=true`."""
    return Response(metrics_text(container.metrics), media_type=CONTENT_TYPE_LATEST)
