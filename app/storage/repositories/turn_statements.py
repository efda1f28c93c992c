"""The statements and column sets ``TurnRepository`` writes a turn with (built once where they
can be): updates of a running turn, the columns of a terminal one, the lease owner's turn."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.sql.dml import ReturningUpdate

from app.storage.models import Turn

__all__ = [
    "TURNS",
    "UNSET",
    "ended_columns",
    "held_by",
    "interrupted_columns",
    "progress_columns",
    "running_params",
    "running_update",
]

# Typed as Table (``__table__`` is declared as a FromClause) for Core updates.
TURNS = cast(Table, Turn.__table__)

UNSET: Any = object()


def progress_columns(
    phase: Any, model_call_index: Any, pending_tool_calls: Any, plan: Any
) -> dict[str, Any]:
    """The progress columns given (not ``UNSET``) of ``update_running``/``advance_running``."""
    given = {
        "phase": phase,
        "model_call_index": model_call_index,
        "pending_tool_calls": pending_tool_calls,
        "plan": plan,
    }
    return {name: value for name, value in given.items() if value is not UNSET}


@lru_cache(maxsize=64)
def running_update(
    names: tuple[str, ...], increments: tuple[str, ...] = (), *, whole_row: bool = False
) -> ReturningUpdate[Any]:
    """An UPDATE of a running turn for one set of columns, built once per process (its values
    are bound parameters ``v_<column>``, increments ``i_<column>``; the key is
    ``k_session_id``/``k_turn_id``), returning ``cancel_requested`` or the whole row."""
    c = TURNS.c
    added = {name: c[name] + bindparam(f"i_{name}", type_=c[name].type) for name in increments}
    stmt = (
        update(TURNS)
        .where(
            c.session_id == bindparam("k_session_id"),
            c.turn_id == bindparam("k_turn_id"),
            c.status == "running",
        )
        .values({**{n: bindparam(f"v_{n}", type_=c[n].type) for n in names}, **added})
    )
    return stmt.returning(*c) if whole_row else stmt.returning(c.cancel_requested)


def running_params(
    session_id: str, turn_id: str, values: Mapping[str, Any], usage: Mapping[str, int] | None
) -> dict[str, Any]:
    params = {f"v_{name}": value for name, value in values.items()}
    params.update(k_session_id=session_id, k_turn_id=turn_id)
    params.update({f"i_{name}": added for name, added in (usage or {}).items()})
    return params


def held_by(session_id: str, turn_id: str, owner: str) -> tuple[Any, ...]:
    """The turn, while it runs under ``owner``'s lease."""
    return (
        Turn.session_id == session_id,
        Turn.turn_id == turn_id,
        Turn.status == "running",
        Turn.lease_owner == owner,
    )


def ended_columns(status: str, outcome: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns of a turn that became terminal: nothing pending, no lease."""
    return {
        "status": status,
        "outcome": outcome,
        "pending_tool_calls": [],
        "finished_at": now,
        "updated_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
    }


def interrupted_columns(outcome: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns of a turn interrupted because its runner is gone (spec §6)."""
    return {**ended_columns("interrupted", outcome, now), "phase": "terminal"}
