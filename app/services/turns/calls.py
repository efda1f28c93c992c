"""A response's tool calls as the turn tracks them, and writing their results.

Each call of a model response is an entry ``{tool_call_id, name, input, caller, result}`` kept on
the turn row (``pending_tool_calls``) while the turn waits for the caller: ``caller`` marks a call
the caller executes, ``result`` is ``{state, output, artifacts}`` once known. Results are written
as tool messages only when every call of the response has one, all in one batch in the
provider's call order, so the stored order is the order the model asked in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.content import Block, ToolCallBlock, text_block
from app.core.counting import TokenCounter
from app.services.events import EventEmitter
from app.services.messages import exact_counts
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage

__all__ = [
    "NOT_EXECUTED_TEXT",
    "CallEntry",
    "CallFinished",
    "CallResult",
    "entries_of",
    "error_result",
    "finished_payload",
    "result_content",
    "result_messages",
    "stored_entries",
    "write_results",
]

# spec §6: what every remaining call of a response gets when the turn ends before running it.
NOT_EXECUTED_TEXT = "tool was not executed because the turn already terminated"

CallEntry = dict[str, Any]


class CallResult(TypedDict):
    """An entry's ``result``: how the call ended, its output blocks and the caller's artifacts
    (stored, never sent)."""

    state: str
    output: list[Any]  # blocks as stored: ``text_block`` or the caller's validated output
    artifacts: list[Any]


class CallFinished(TypedDict):
    """The ``tool_call_finished`` update (spec §16)."""

    tool_call_id: str
    tool_name: str
    state: str
    is_error: bool
    output: list[Any]
    artifacts: list[Any]


def stored_entries(pending: Any) -> list[CallEntry]:
    """Copies of a turn row's ``pending_tool_calls`` entries. What no version writes (not a
    list; an item without a string ``tool_call_id`` and ``name`` and an ``input``) is left out:
    a hand-edited row is still read, cancelled or run out, never an internal error (its calls
    then get no stored result; the pipeline pairs each with an interrupted one)."""
    if not isinstance(pending, list):
        return []
    return [
        dict(entry)
        for entry in pending
        if isinstance(entry, dict)
        and isinstance(entry.get("tool_call_id"), str)
        and isinstance(entry.get("name"), str)
        and "input" in entry
    ]


def entries_of(
    calls: Sequence[ToolCallBlock], refused: Mapping[str, str] | None = None
) -> list[CallEntry]:
    """The entries of a response's calls; a call in ``refused`` (its arguments were not
    stored: ``answers.bounded_answer``) carries the text of its error result as ``refused``."""
    entries: list[CallEntry] = []
    for c in calls:
        entry: CallEntry = {
            "tool_call_id": c["id"],
            "name": c["name"],
            "input": c["input"],
            "caller": False,
            "result": None,
        }
        if refused and c["id"] in refused:
            entry["refused"] = refused[c["id"]]
        entries.append(entry)
    return entries


def error_result(text: str, state: str = "error") -> CallResult:
    return {"state": state, "output": [text_block(text)], "artifacts": []}


def finished_payload(entry: CallEntry) -> CallFinished:
    result = entry["result"]
    return {
        "tool_call_id": entry["tool_call_id"],
        "tool_name": entry["name"],
        "state": result["state"],
        "is_error": result["state"] != "success",
        "output": result["output"],
        "artifacts": result.get("artifacts") or [],
    }


async def write_results(
    db: AsyncSession,
    events: EventEmitter,
    counter: TokenCounter,
    *,
    session_id: str,
    turn_id: str,
    entries: Sequence[CallEntry],
) -> None:
    """Append one tool message per entry, in order (``result_messages``)."""
    messages = await result_messages(
        db, events, counter, session_id=session_id, turn_id=turn_id, entries=entries
    )
    if messages:
        await MessageRepository(db).append(session_id, messages)


def result_content(entry: CallEntry, result: CallResult) -> list[Block]:
    """The content of the tool message that answers ``entry`` with ``result``."""
    block: dict[str, Any] = {
        "type": "tool_result",
        "id": entry["tool_call_id"],
        "name": entry["name"],
        "output": result["output"],
        "state": result["state"],
    }
    if result.get("artifacts"):
        block["artifacts"] = result["artifacts"]
    return cast(list[Block], [block])


async def result_messages(
    db: AsyncSession,
    events: EventEmitter,
    counter: TokenCounter,
    *,
    session_id: str,
    turn_id: str,
    entries: Sequence[CallEntry],
) -> list[NewMessage]:
    """One tool message per entry, in order; an entry without a result gets the fixed
    ``interrupted`` result (and its ``tool_call_finished`` update)."""
    messages: list[NewMessage] = []
    for entry in entries:
        if entry["result"] is None:
            entry["result"] = error_result(NOT_EXECUTED_TEXT, "interrupted")
            await events.emit(
                db, session_id, "tool_call_finished", finished_payload(entry), turn_id=turn_id
            )
        content = result_content(entry, entry["result"])
        messages.append(
            NewMessage(
                role="tool",
                kind="normal",
                content=content,
                turn_id=turn_id,
                token_counts=exact_counts(counter, "tool", content),
            )
        )
    return messages
