"""The pins section costs a session without pins nothing: the World State sampler reads no pins
while the locked row's ``pin_count`` is 0, and the count follows every change in the same
transaction. Statements are counted on the engine."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.services.pins import pins_section
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import SessionRepository
from app.storage.repositories.pins import PinRepository
from tests.conftest import recorded_statements, touching
from tests.services.test_turn_step_reads import new_session

pytestmark = pytest.mark.anyio


async def test_no_pins_no_read(engine: AsyncEngine, factory: SessionFactory) -> None:
    sid = await new_session(factory)
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        with recorded_statements(engine) as statements:
            section = await pins_section(db, session, current_row=True)
    assert (section.section_id, section.body) == ("session/pins", None)
    assert statements == []


async def test_the_count_follows_the_pins_and_the_section_reads_them(
    engine: AsyncEngine, factory: SessionFactory
) -> None:
    sid = await new_session(factory)
    async with unit_of_work(factory) as db:
        await SessionRepository(db).lock(sid)
        pins = PinRepository(db)
        for n, kind in enumerate(("fact", "constraint")):
            await pins.add(sid, pin_id=f"pin-{n}", kind=kind, text=f"rule {n}", proposal_id=None)
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid, for_update=True)
        assert session.pin_count == 2
        with recorded_statements(engine) as statements:
            section = await pins_section(db, session, current_row=True)
        assert touching(statements, "session_pins")
        assert section.body is not None
        assert section.body.index("- rule 1") < section.body.index("- rule 0")  # constraints first
        assert await PinRepository(db).remove(sid, "pin-1")
        assert session.pin_count == 1  # the loaded row follows, in the same transaction
    async with unit_of_work(factory) as db:
        assert await PinRepository(db).remove(sid, "pin-0")
    async with unit_of_work(factory) as db:
        session = await SessionRepository(db).require(sid)
        assert session.pin_count == 0
        # A row not known to be current is never trusted: the pins are read.
        with recorded_statements(engine) as statements:
            section = await pins_section(db, session, current_row=False)
        assert section.body is None
        assert touching(statements, "session_pins")
