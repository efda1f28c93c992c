"""Model registry: models registered through the API over the built-in catalogue."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.capabilities import ModelCapabilities
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.tenancy import SHARED_TENANT
from app.providers.factory import HTTP_PROVIDER_KINDS
from app.providers.urls import base_url_problem, destination_problem
from app.services.catalogue import CATALOGUE
from app.services.model_types import ModelEntry, ProviderSpec
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import RegisteredModel
from app.storage.repositories.registry import ModelRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["ModelService", "resolve_model", "resolve_named_model"]


def _entry(row: RegisteredModel) -> ModelEntry:
    return ModelEntry(
        id=row.id,
        capabilities=row.capabilities(),
        provider=ProviderSpec(
            kind=row.provider_kind,  # type: ignore[arg-type]
            base_url=row.provider_base_url,
            model_name=row.provider_model_name,
            api_key_env=row.provider_api_key_env,
            script=row.script,
        ),
        builtin=False,
        script_position=row.script_position,
        owner=row.tenant_id,
    )


def _not_found(model_id: str) -> NotFound:
    return NotFound(
        "model_not_found",
        f"no model {model_id!r}; GET /v1/models lists them, PUT /v1/models/{{id}} registers one",
        model_id=model_id,
    )


async def _lookup(db: AsyncSession, tenant_id: str, model_id: str) -> ModelEntry | None:
    row = await ModelRepository(db).visible(tenant_id, model_id)
    return _entry(row) if row is not None else CATALOGUE.get(model_id)


async def resolve_model(db: AsyncSession, model_id: str, tenant_id: str) -> ModelEntry:
    """The model ``model_id`` as ``tenant_id`` sees it: its own registered model, else a shared
    one, else the catalogue entry of that id (inside the caller's transaction)."""
    entry = await _lookup(db, tenant_id, model_id)
    if entry is None:
        raise _not_found(model_id)
    return entry


async def resolve_named_model(
    db: AsyncSession, model_id: str, field: str, tenant_id: str
) -> ModelEntry:
    """The model a request body names in ``field`` (``model_id``, ``prepare.model_id``,
    ``summary_model_id``): one that does not exist makes the request wrong (422, the code
    naming the field), as the path's own resource missing is the 404."""
    entry = await _lookup(db, tenant_id, model_id)
    if entry is not None:
        return entry
    detail = (
        f"{field} names model {model_id!r}, which does not exist; GET /v1/models lists them, "
        "PUT /v1/models/{id} registers one"
    )
    if field.endswith("summary_model_id"):
        raise InvalidInput("unknown_summary_model_id", detail, field=field, model_id=model_id)
    raise InvalidInput("unknown_model_id", detail, field=field, model_id=model_id)


def _check_base_url(provider: ProviderSpec, *, allow_private: bool) -> None:
    """An HTTP provider's URL must be one its adapter can send to (``invalid_base_url``), at a
    host the service may reach (``base_url_not_allowed``: ``app.providers.destinations``)."""
    if provider.kind not in HTTP_PROVIDER_KINDS or provider.base_url is None:
        return
    problem = base_url_problem(provider.base_url)
    if problem is not None:
        raise InvalidInput(
            "invalid_base_url", f"provider.base_url {problem}", field="provider.base_url"
        )
    refused = destination_problem(provider.base_url, allow_private=allow_private)
    if refused is not None:
        raise InvalidInput(
            "base_url_not_allowed", f"provider.base_url {refused}", field="provider.base_url"
        )


class ModelService:
    def __init__(self, db: SessionFactory, *, allow_private_hosts: bool = False) -> None:
        self._db = db
        self._allow_private_hosts = allow_private_hosts

    async def get(self, tenant_id: str, model_id: str) -> ModelEntry:
        async with unit_of_work(self._db, read_only=True) as db:
            return await resolve_model(db, model_id, tenant_id)

    async def named(self, tenant_id: str, model_id: str, field: str) -> ModelEntry:
        """The model a request body names in ``field`` (``resolve_named_model``)."""
        async with unit_of_work(self._db, read_only=True) as db:
            return await resolve_named_model(db, model_id, field, tenant_id)

    async def list(self, tenant_id: str) -> list[ModelEntry]:
        """What ``tenant_id`` sees: the catalogue, under the shared models, under its own."""
        async with unit_of_work(self._db, read_only=True) as db:
            rows = await ModelRepository(db).list_all((tenant_id, SHARED_TENANT))
        shared = {r.id: _entry(r) for r in rows if r.tenant_id == SHARED_TENANT}
        own = {r.id: _entry(r) for r in rows if r.tenant_id != SHARED_TENANT}
        merged = {**CATALOGUE, **shared, **own}
        return [merged[k] for k in sorted(merged)]

    async def put(
        self,
        tenant_id: str,
        model_id: str,
        capabilities: ModelCapabilities,
        provider: ProviderSpec,
    ) -> tuple[ModelEntry, bool]:
        """Register or replace ``tenant_id``'s model ``model_id`` (``SHARED_TENANT``: a shared
        model, an admin's operation)."""
        capabilities.limits()  # refuse reserves that consume the window before storing
        _check_base_url(provider, allow_private=self._allow_private_hosts)
        row = RegisteredModel(
            tenant_id=tenant_id,
            id=model_id,
            context_window_tokens=capabilities.context_window_tokens,
            max_output_tokens=capabilities.max_output_tokens,
            max_reasoning_tokens=capabilities.max_reasoning_tokens,
            accepts_data_blocks=capabilities.accepts_data_blocks,
            fixed_reserve_tokens=capabilities.fixed_reserve_tokens,
            safety_margin_tokens=capabilities.safety_margin_tokens,
            output_reserve_tokens=capabilities.output_reserve_tokens,
            token_counter=capabilities.token_counter,
            prompt_caching=capabilities.prompt_caching,
            reasoning=capabilities.reasoning,
            provider_kind=provider.kind,
            provider_base_url=provider.base_url,
            provider_model_name=provider.model_name,
            provider_api_key_env=provider.api_key_env,
            script=provider.script,
        )
        async with unit_of_work(self._db) as db:
            stored, created = await ModelRepository(db).put(row)
            return _entry(stored), created

    async def delete(self, tenant_id: str, model_id: str) -> None:
        """Remove a registered model. A built-in id falls back to the catalogue entry; any other
        model still named by a session is kept (``model_in_use``): its sessions could neither
        take messages nor run turns or compactions without it."""
        async with unit_of_work(self._db) as db:
            if model_id not in CATALOGUE:
                # A shared model may serve every tenant's sessions: all of them count.
                scope = None if tenant_id == SHARED_TENANT else tenant_id
                users = await SessionRepository(db).count_using_model(model_id, scope)
                if users and await ModelRepository(db).get(tenant_id, model_id) is not None:
                    raise Conflict(
                        "model_in_use",
                        f"{users} session(s) use model {model_id!r} as their model or summary "
                        "model; switch them to another model (PATCH /v1/sessions/{id}) or delete "
                        "them first",
                        sessions=users,
                    )
            if await ModelRepository(db).delete(tenant_id, model_id):
                return
        if model_id in CATALOGUE:
            raise Conflict(
                "builtin_model",
                f"{model_id!r} is a built-in catalogue model: built-in entries cannot be deleted, "
                "only a registered override of one can (PUT a model with the same id to override "
                "it)",
                model_id=model_id,
            )
        raise _not_found(model_id)
