"""What callers do to a running turn: post tool results, cancel it, read it."""

from __future__ import annotations

from collections.abc import Sequence

from app.api.schemas.turns import ToolResultIn
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.limits.messages import check_message_bytes
from app.fastjson import ESTIMATE
from app.services.models import resolve_model
from app.services.turns.calls import (
    CallEntry,
    CallResult,
    finished_payload,
    result_content,
    stored_entries,
    write_results,
)
from app.services.turns.deps import TurnDeps
from app.services.turns.lease import lease_expiry
from app.services.turns.tools import DoomRecord
from app.services.turns.waiting import end_waiting, tool_results_overdue
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = [
    "DeadlinePassed",
    "ResultsOutcome",
    "cancel_waiting_or_flag",
    "post_tool_results",
    "require_turn",
    "turn_not_waiting",
]


class DeadlinePassed(Exception):
    """The turn waits for tool results past its deadline: it has to end (``expire_waiting``)
    before anything else is done to it. Raised before anything is written."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(turn_id)
        self.turn_id = turn_id


def turn_not_waiting(turn: Turn) -> Conflict:
    return Conflict(
        "turn_not_waiting",
        f"turn {turn.turn_id} is {turn.status} ({turn.phase}), not waiting for tool results",
        turn_id=turn.turn_id,
        turn_status=turn.status,
    )


def turn_not_found(turn_id: str) -> NotFound:
    return NotFound("turn_not_found", f"no turn {turn_id!r} in this session", turn_id=turn_id)


async def require_turn(deps: TurnDeps, session_id: str, turn_id: str) -> Turn:
    async with unit_of_work(deps.db, read_only=True) as db:
        await SessionRepository(db).require(session_id)
        turn = await TurnRepository(db).get(session_id, turn_id)
    if turn is None:
        raise turn_not_found(turn_id)
    return turn


class ResultsOutcome:
    def __init__(self, turn: Turn, resume: bool, doom: DoomRecord | None) -> None:
        self.turn = turn
        self.resume = resume
        self.doom = doom


def _doom_of(entries: Sequence[CallEntry]) -> DoomRecord | None:
    for entry in reversed(entries):
        if "doom" in entry:
            return DoomRecord.from_json(entry["doom"])
    return None


def _result_of(posted: ToolResultIn) -> CallResult:
    """A posted result as the entry stores it (the blocks as the caller sent them)."""
    dumped = posted.model_dump()
    return {
        "state": dumped["state"],
        "output": dumped["output"],
        "artifacts": dumped["artifacts"] or [],
    }


def _check_results(entries: list[CallEntry], results: Sequence[tuple[str, CallResult]]) -> None:
    if not results:
        raise InvalidInput("no_tool_results", "post at least one result")
    by_id = {e["tool_call_id"]: e for e in entries if e.get("caller")}
    seen: set[str] = set()
    for index, (call_id, result) in enumerate(results):
        if call_id in seen:
            raise InvalidInput(
                "duplicate_tool_result",
                f"tool call {call_id!r} appears more than once in this post; send one result "
                "per call",
                tool_call_id=call_id,
            )
        seen.add(call_id)
        entry = by_id.get(call_id)
        if entry is None:
            raise InvalidInput(
                "unknown_tool_call",
                f"tool call {call_id!r} is not waiting for a result in this turn; "
                f"waiting: {sorted(k for k, e in by_id.items() if e['result'] is None)}",
                tool_call_id=call_id,
                field=f"results.{index}.tool_call_id",
            )
        if entry["result"] is not None:
            raise Conflict(
                "tool_result_already_posted",
                f"a result for tool call {call_id!r} was already recorded; results are final",
                tool_call_id=call_id,
            )
        # The message it becomes obeys the limit of one stored message (its tokens do not
        # matter: a tool result is projected to its share of every request, spec §2.2).
        content = result_content(entry, result)
        check_message_bytes(
            f"result {index}", ESTIMATE.measure_message("tool", content), index=index
        )


async def post_tool_results(
    deps: TurnDeps, owner: str, session_id: str, turn_id: str, results: Sequence[ToolResultIn]
) -> ResultsOutcome:
    """Record results (partial posts allowed). When every call has one, write all tool messages
    in call order, take the lease and tell the caller to resume the runner here."""
    async with unit_of_work(deps.db) as db:
        session = await SessionRepository(db).require(session_id, for_update=True)
        turns = TurnRepository(db)
        turn = await turns.get(session_id, turn_id)
        if turn is None:
            raise turn_not_found(turn_id)
        if turn.status != "running" or turn.phase != "waiting_tool_results":
            raise turn_not_waiting(turn)
        if tool_results_overdue(turn):
            raise DeadlinePassed(turn_id)  # too late: no result is taken after the deadline
        entries = stored_entries(turn.pending_tool_calls)
        posted = [(r.tool_call_id, _result_of(r)) for r in results]
        _check_results(entries, posted)
        by_id = {e["tool_call_id"]: e for e in entries}
        for call_id, result in posted:
            entry = by_id[call_id]
            entry["result"] = result
            await deps.events.emit(
                db, session_id, "tool_call_finished", finished_payload(entry), turn_id=turn_id
            )
        if any(e["result"] is None for e in entries):
            await turns.update_running(session_id, turn_id, pending_tool_calls=entries)
            return ResultsOutcome(turn, False, None)
        model = await resolve_model(db, session.model_id, session.tenant_id)
        await write_results(
            db,
            deps.events,
            deps.counter(model.capabilities.token_counter),
            session_id=session_id,
            turn_id=turn_id,
            entries=entries,
        )
        await turns.update_running(
            session_id, turn_id, pending_tool_calls=[], phase="running_model"
        )
        turn.lease_owner = owner
        turn.lease_expires_at = lease_expiry(deps)
        await db.flush()
        await deps.events.emit(
            db, session_id, "phase_changed", {"phase": "running_model"}, turn_id=turn_id
        )
    return ResultsOutcome(turn, True, _doom_of(entries))


async def cancel_waiting_or_flag(deps: TurnDeps, session_id: str, turn_id: str) -> bool:
    """Cancel: a turn waiting for the caller ends here and now (its unanswered calls get the
    fixed result); a turn with a runner is flagged and stops at its next check. Returns whether
    a runner has to notice the flag."""
    async with unit_of_work(deps.db) as db:
        session = await SessionRepository(db).require(session_id, for_update=True)
        turns = TurnRepository(db)
        turn = await turns.get(session_id, turn_id)
        if turn is None:
            raise turn_not_found(turn_id)
        if turn.status != "running":
            raise Conflict(
                "turn_not_active",
                f"turn {turn_id} is already {turn.status}; only a running turn can be cancelled",
                turn_id=turn_id,
                turn_status=turn.status,
            )
        if turn.phase != "waiting_tool_results":
            await turns.request_cancel(session_id, turn_id)
            return True
        if tool_results_overdue(turn):
            raise DeadlinePassed(turn_id)  # it ended at its deadline, before this cancel
        finished = await end_waiting(deps, db, session, turn, status="cancelled", outcome={})
    if finished is not None:
        deps.observability.turns.finished(finished)
    return False
