"""Registered models (with the scripted kind's shared cursor) and calibration samples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, select, update

from app.core.tenancy import DEFAULT_TENANT, SHARED_TENANT
from app.storage.base import utc_now
from app.storage.models import AgentSession, CalibrationSample, RegisteredModel, ScriptPosition
from app.storage.repositories.base import Repository

__all__ = ["CalibrationRepository", "ModelRepository", "ScriptTake"]


@dataclass(frozen=True, slots=True)
class ScriptTake:
    """One consumed position of a scripted model. ``entry`` is ``None`` when the script ran out
    (``index >= length``): the caller reports a ``model_error``; scripts never cycle."""

    index: int
    length: int
    entry: Any | None


# Prebuilt: every model call resolves its model, and building the statement anew cost about
# what running it did.
_VISIBLE = select(RegisteredModel).where(
    RegisteredModel.id == bindparam("k_id"),
    RegisteredModel.tenant_id.in_([bindparam("k_tenant"), bindparam("k_shared")]),
)


class ModelRepository(Repository):
    """Models by ``(tenant_id, id)``: each tenant names its models in its own namespace, and
    ``SHARED_TENANT`` holds the models every tenant sees (``app.core.tenancy``)."""

    async def get(self, tenant_id: str, model_id: str) -> RegisteredModel | None:
        return await self.session.get(RegisteredModel, (tenant_id, model_id))

    async def visible(self, tenant_id: str, model_id: str) -> RegisteredModel | None:
        """The tenant's own model of that id, else the shared one (one query)."""
        params = {"k_id": model_id, "k_tenant": tenant_id, "k_shared": SHARED_TENANT}
        rows = (await self.session.execute(_VISIBLE, params)).scalars().all()
        own = [r for r in rows if r.tenant_id == tenant_id]
        return (own or list(rows))[0] if rows else None

    async def list_all(self, tenant_ids: Sequence[str]) -> Sequence[RegisteredModel]:
        stmt = (
            select(RegisteredModel)
            .where(RegisteredModel.tenant_id.in_(tenant_ids))
            .order_by(RegisteredModel.id, RegisteredModel.tenant_id)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def put(self, row: RegisteredModel) -> tuple[RegisteredModel, bool]:
        """Create or replace a model (PUT); returns ``(model, created)``. Replacing resets the
        script position (spec §14.2: a PUT resets it)."""
        if row.tenant_id is None:  # built without one: the column's default, known before
            row.tenant_id = DEFAULT_TENANT  # the INSERT so that the lookup below can use it
        existing = await self.session.get(
            RegisteredModel, (row.tenant_id, row.id), with_for_update=True
        )
        if existing is None:
            row.script_position = 0
            self.session.add(row)
            await self.session.flush()
            return row, True
        for column in RegisteredModel.__table__.columns:
            if column.key not in ("tenant_id", "id", "created_at", "updated_at", "script_position"):
                value = getattr(row, column.key)
                default = column.default
                if value is None and default is not None and default.is_scalar:
                    # Left unset on the new row: what an INSERT would have stored.
                    value = default.arg
                setattr(existing, column.key, value)
        existing.script_position = 0
        existing.updated_at = utc_now()
        # Every session starts the new script from its first entry.
        await self._reset_positions(row.tenant_id, row.id)
        await self.session.flush()
        return existing, False

    async def _reset_positions(self, tenant_id: str, model_id: str) -> None:
        """Forget the script positions of the sessions that use this tenant's ``model_id`` (a
        shared model: every tenant's sessions). Another tenant's model of the same id keeps its
        sessions' positions."""
        stmt = delete(ScriptPosition).where(ScriptPosition.model_id == model_id)
        if tenant_id != SHARED_TENANT:
            owned = select(AgentSession.id).where(AgentSession.tenant_id == tenant_id)
            stmt = stmt.where(ScriptPosition.session_id.in_(owned))
        await self.session.execute(stmt)

    async def delete(self, tenant_id: str, model_id: str) -> bool:
        await self._reset_positions(tenant_id, model_id)
        stmt = (
            delete(RegisteredModel)
            .where(RegisteredModel.tenant_id == tenant_id, RegisteredModel.id == model_id)
            .returning(RegisteredModel.id)
        )
        return (await self.session.execute(stmt)).first() is not None

    async def take_script_entry(
        self, tenant_id: str, model_id: str, session_id: str
    ) -> ScriptTake | None:
        """Consume the next entry of a scripted model for one session, atomically across
        replicas. Each session has its own position (``script_positions``: an
        ``INSERT … ON CONFLICT DO UPDATE … RETURNING``, so concurrent calls of one session each
        get a different entry); the model's ``script_position`` counts every call since the last
        ``PUT`` (an ``UPDATE … RETURNING``, which also locks the model row against a concurrent
        ``PUT``). ``None`` when the model does not exist or has no script. Commit promptly."""
        stmt = (
            update(RegisteredModel)
            .where(
                RegisteredModel.tenant_id == tenant_id,
                RegisteredModel.id == model_id,
                RegisteredModel.script.is_not(None),
            )
            .values(script_position=RegisteredModel.script_position + 1)
            .returning(RegisteredModel.script)
        )
        row = (await self.session.execute(stmt)).first()
        if row is None:
            return None
        insert = self._insert(ScriptPosition).values(
            session_id=session_id, model_id=model_id, taken=1
        )
        taken = await self.session.scalar(
            insert.on_conflict_do_update(
                index_elements=[ScriptPosition.session_id, ScriptPosition.model_id],
                set_={"taken": ScriptPosition.taken + 1},
            ).returning(ScriptPosition.taken)
        )
        index = int(taken or 1) - 1
        entries = list(row[0] or [])
        entry = entries[index] if index < len(entries) else None
        return ScriptTake(index=index, length=len(entries), entry=entry)


class CalibrationRepository(Repository):
    """Provider-reported input tokens next to our estimate (spec §3.4). Only the last ``keep``
    samples per model and counter are kept: the table is global and must stay small."""

    async def add(
        self,
        *,
        model_id: str,
        counter: str,
        estimated_input_tokens: int,
        reported_input_tokens: int,
        keep: int = 50,
        trim: bool = True,
    ) -> None:
        """Store a sample; with ``trim`` also delete all but the newest ``keep`` of the model and
        counter (a caller may trim only now and then: the reads never look past ``keep``)."""
        self.session.add(
            CalibrationSample(
                model_id=model_id,
                counter=counter,
                estimated_input_tokens=estimated_input_tokens,
                reported_input_tokens=reported_input_tokens,
                created_at=utc_now(),
            )
        )
        await self.session.flush()
        if not trim:
            return
        newest = (
            select(CalibrationSample.id)
            .where(CalibrationSample.model_id == model_id, CalibrationSample.counter == counter)
            .order_by(CalibrationSample.id.desc())
            .limit(keep)
        )
        await self.session.execute(
            delete(CalibrationSample)
            .where(
                CalibrationSample.model_id == model_id,
                CalibrationSample.counter == counter,
                CalibrationSample.id.not_in(newest.scalar_subquery()),
            )
            .execution_options(synchronize_session=False)
        )

    async def recent(
        self, model_id: str, counter: str, *, limit: int = 50
    ) -> Sequence[CalibrationSample]:
        """Newest first."""
        stmt = (
            select(CalibrationSample)
            .where(CalibrationSample.model_id == model_id, CalibrationSample.counter == counter)
            .order_by(CalibrationSample.id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()
