"""``/v1/models``: the built-in catalogue and registered models."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path
from fastapi.responses import Response

from app.api import examples
from app.api.auth import PrincipalDep
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.models import model_json
from app.api.responses import MODEL, problems
from app.api.schemas.models import ModelIn, ModelOut
from app.services.model_types import ProviderSpec

router = APIRouter(prefix="/v1/models", tags=["models"])

ModelId = Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")


@router.get("", response_model=list[ModelOut], responses=problems())
async def list_models(container: ContainerDep, principal: PrincipalDep) -> Response:
    """The built-in catalogue, shared models and the tenant's own models (an own model overrides
    a shared one of the same id, which overrides the catalogue)."""
    readiness = container.model_clients.readiness
    entries = await container.models.list(principal.tenant_id)
    return json_response([model_json(e, readiness(e)) for e in entries])


@router.get("/{model_id}", response_model=ModelOut, responses=problems(MODEL))
async def get_model(
    container: ContainerDep, principal: PrincipalDep, model_id: str = ModelId
) -> Response:
    """One model: capabilities, derived limits, provider, readiness and calibration (spec §3.4)."""
    entry = await container.models.get(principal.tenant_id, model_id)
    calibration = await container.calibration.describe(model_id, entry.capabilities.token_counter)
    readiness = container.model_clients.readiness(entry)
    return json_response(model_json(entry, readiness, calibration))


@router.put(
    "/{model_id}",
    response_model=ModelOut,
    responses={
        201: {"model": ModelOut, "description": "Registered"},
        **problems(
            {422: ("invalid_capabilities", "invalid_base_url", "base_url_not_allowed")},
            body=True,
        ),
    },
)
async def put_model(
    body: Annotated[ModelIn, Body(openapi_examples=examples.MODEL)],
    container: ContainerDep,
    principal: PrincipalDep,
    model_id: str = ModelId,
) -> Response:
    """Register or replace a model of the calling tenant (201 when created); a scripted model's
    position resets. `readiness` says at once when the key variable it names is not set."""
    provider = ProviderSpec(**body.provider.model_dump(exclude_unset=True))
    entry, created = await container.models.put(
        principal.tenant_id, model_id, body.to_core(), provider
    )
    readiness = container.model_clients.readiness(entry)
    return json_response(model_json(entry, readiness), status_code=201 if created else 200)


@router.delete(
    "/{model_id}",
    status_code=204,
    responses=problems(MODEL, {409: ("builtin_model", "model_in_use")}),
)
async def delete_model(
    container: ContainerDep, principal: PrincipalDep, model_id: str = ModelId
) -> Response:
    """Remove a model of the calling tenant (built-in catalogue entries and shared models
    cannot be deleted here)."""
    await container.models.delete(principal.tenant_id, model_id)
    return Response(status_code=204)
