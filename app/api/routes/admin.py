"""``/v1/admin``: API keys bound to tenants and shared models (``docs/security.md``); every
operation needs a key with the admin scope (403 ``admin_scope_required``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import Response

from app.api import examples
from app.api.auth import require_admin
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.models import model_json
from app.api.responses import MODEL, Codes, problems
from app.api.schemas.admin import IssuedKeyOut, KeyIn, KeyListOut, KeyOut
from app.api.schemas.models import ModelIn, ModelOut
from app.core.tenancy import SHARED_TENANT, TENANT_ID_PATTERN
from app.services.model_types import ProviderSpec

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])

_ADMIN: Codes = {403: ("admin_scope_required",)}
_KEY: Codes = {404: ("key_not_found",)}
KeyId = Annotated[str, Path(min_length=1, max_length=200)]
ModelId = Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")


@router.post(
    "/keys",
    status_code=201,
    response_model=IssuedKeyOut,
    responses=problems(_ADMIN, body=True),
)
async def create_key(
    body: Annotated[KeyIn, Body(openapi_examples=examples.API_KEY)], container: ContainerDep
) -> Response:
    """Make a key for a tenant; the answer is the only time the key itself is shown."""
    issued = await container.tenancy.create(body.tenant_id, body.scope, body.name)
    return json_response(IssuedKeyOut.issued(issued).model_dump(mode="json"), status_code=201)


@router.get("/keys", response_model=KeyListOut, responses=problems(_ADMIN))
async def list_keys(
    container: ContainerDep,
    tenant_id: Annotated[str | None, Query(pattern=TENANT_ID_PATTERN)] = None,
) -> Response:
    """Every stored key (never the key itself), oldest first, or those of one tenant."""
    keys = await container.tenancy.list(tenant_id)
    return json_response(KeyListOut(keys=[KeyOut.of(k) for k in keys]).model_dump(mode="json"))


@router.post(
    "/keys/{key_id}/rotate",
    status_code=201,
    response_model=IssuedKeyOut,
    responses=problems(_ADMIN, _KEY),
)
async def rotate_key(key_id: KeyId, container: ContainerDep) -> Response:
    """A new key for the same tenant, scope and name; the old key works until it is revoked."""
    issued = await container.tenancy.rotate(key_id)
    return json_response(IssuedKeyOut.issued(issued).model_dump(mode="json"), status_code=201)


@router.delete("/keys/{key_id}", status_code=204, responses=problems(_ADMIN, _KEY))
async def revoke_key(key_id: KeyId, container: ContainerDep) -> Response:
    """Revoke a key: from now on it authenticates nothing."""
    await container.tenancy.revoke(key_id)
    return Response(status_code=204)


@router.put(
    "/models/{model_id}",
    response_model=ModelOut,
    responses={
        201: {"model": ModelOut, "description": "Registered"},
        **problems(
            _ADMIN,
            {422: ("invalid_capabilities", "invalid_base_url", "base_url_not_allowed")},
            body=True,
        ),
    },
)
async def put_shared_model(
    body: Annotated[ModelIn, Body(openapi_examples=examples.MODEL)],
    container: ContainerDep,
    model_id: str = ModelId,
) -> Response:
    """Register or replace a shared model, seen by every tenant (a tenant's own model of the
    same id overrides it for that tenant)."""
    provider = ProviderSpec(**body.provider.model_dump(exclude_unset=True))
    entry, created = await container.models.put(SHARED_TENANT, model_id, body.to_core(), provider)
    readiness = container.model_clients.readiness(entry)
    return json_response(model_json(entry, readiness), status_code=201 if created else 200)


@router.delete(
    "/models/{model_id}",
    status_code=204,
    responses=problems(_ADMIN, MODEL, {409: ("builtin_model", "model_in_use")}),
)
async def delete_shared_model(container: ContainerDep, model_id: str = ModelId) -> Response:
    """Remove a shared model (kept while any tenant's session names it)."""
    await container.models.delete(SHARED_TENANT, model_id)
    return Response(status_code=204)
