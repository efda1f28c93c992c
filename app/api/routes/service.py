"""Service endpoints: liveness, readiness, metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.auth import require_metrics_key
from app.api.deps import ContainerDep
from app.api.problems import problem_response
from app.api.responses import problems
from app.api.schemas.service import Health, Readiness
from app.core.tenancy import DEFAULT_TENANT
from app.observability import metrics_text
from app.services.provider_probe import probe_providers
from app.storage.migrate import is_at_head

router = APIRouter(tags=["service"])


@router.get("/healthz", responses=problems(secured=False))
async def healthz() -> Health:
    """The process is alive (it checks nothing else: see `/readyz`)."""
    return Health(status="ok")


@router.get(
    "/readyz",
    responses={
        200: {
            "description": "Ready",
            "model": Readiness,
            "content": {
                "application/json": {
                    "examples": {
                        "database": {"summary": "Default", "value": {"status": "ready"}},
                        "providers": {
                            "summary": "With providers=true",
                            "value": {
                                "status": "ready",
                                "providers": [
                                    {
                                        "base_url": "https://api.openai.com/v1",
                                        "models": ["gpt-4o"],
                                        "reachable": True,
                                    }
                                ],
                            },
                        },
                    },
                }
            },
        },
        **problems({503: ("not_ready",)}, secured=False),
    },
    response_class=Response,
)
async def readyz(
    container: ContainerDep,
    providers: Annotated[
        bool,
        Query(
            description="Also try each provider `base_url` of the operator's models (those of the "
            "configured keys' tenant and the shared ones; a plain GET without a key, 5 s at "
            "most): 503 when one does not answer."
        ),
    ] = False,
) -> Response:
    """The database is reachable, migrated to the latest schema and takes writes (503
    otherwise); with `providers=true`, every provider of the operator's models answers too."""
    if not await is_at_head(container.engine, container.outages):
        return problem_response(
            503,
            "not_ready",
            "the database is unreachable or not migrated to the latest schema; run `ctxsvc"
            " migrate`",
        )
    problem = container.outages.write_problem()
    if problem is not None:
        return problem_response(
            503,
            "not_ready",
            f"the database takes no writes ({problem}): free space or make it writable",
        )
    if not providers:
        return Response('{"status":"ready"}', media_type="application/json")
    # The operator's models (those of the configured keys' tenant and the shared ones): a
    # tenant's own broken provider is no reason to take a replica out of rotation.
    callable_models = await container.models.list(DEFAULT_TENANT)
    probes = await probe_providers(callable_models, container.model_clients)
    listed = [probe.to_json() for probe in probes]
    down = [probe.detail for probe in probes if not probe.reachable and probe.detail]
    if down:
        return problem_response(503, "not_ready", "; ".join(down), providers=listed)
    return JSONResponse({"status": "ready", "providers": listed})


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
