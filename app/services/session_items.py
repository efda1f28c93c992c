"""A session kept as OpenAI Responses items: append items, take back the last one, start anew.

For clients whose own memory is a list of Responses input items (the OpenAI Agents SDK's
``Session``): they read the prepared context with the session prepare (``encode:
"openai_responses"``, so pruning and compaction stay the service's), and write through here.
Nothing stored is ever deleted: taking back and starting a new epoch change the session's
``conversation_view`` (``app.core.conversation_view``), in one transaction each, refused while
a turn runs (the turn owns the Conversation then).

Taking back the last item: the last stored message the Conversation shows is hidden. A message
stands for one item or several (an answer: its reasoning items, its text, its calls); when it
stood for several, a copy of it without the last item is appended, so exactly one item leaves
the Conversation. Calls of a hidden message that had no result are released (they can no longer
be answered; the same call may be stored again); the call a hidden result answered is open
again, and until another result is stored every request answers it with the synthesized
``interrupted`` result (spec §2.3: every call is answered). The compaction's own items (the replayed
request, the summary, the reminder) are the service's and are never taken back: with only
those left there is nothing to take back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.content import Block
from app.providers.encoding.openai_responses import RESPONSES_DRIVER, message_items
from app.providers.encoding.openai_responses_items import items_to_messages
from app.services.compaction.source import require_idle
from app.services.conversation import load_active
from app.services.messages import MessageService
from app.services.session_config import conversation_view_of
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = ["Popped", "SessionItemService"]


@dataclass(frozen=True, slots=True)
class Popped:
    """What taking back the last item did (``PopResponse``): the Responses item taken back (as
    the session prepare encodes it), the stored message hidden and the copy kept of the rest
    of it; all ``None`` when there was nothing to take back."""

    item: dict[str, Any] | None = None
    hidden: StoredMessage | None = None
    kept: StoredMessage | None = None


class SessionItemService:
    def __init__(self, db: SessionFactory, messages: MessageService) -> None:
        self._db = db
        self._messages = messages

    async def add(self, session_id: str, items: Sequence[Mapping[str, Any]]) -> list[StoredMessage]:
        """Append ``items`` (Responses items as the caller wrote them) as messages, all or
        nothing."""
        async with unit_of_work(self._db) as db:
            await SessionRepository(db).require(session_id)
            answered = {
                str(i.get("call_id")) for i in items if i.get("type") == "function_call_output"
            }
            open_calls = await MessageRepository(db).find_unresolved_tool_calls(
                session_id, answered
            )
            converted = items_to_messages(items, {c.call_id: c.name for c in open_calls})
            return await self._messages.append_in(
                db, session_id, [(m.role, "normal", m.content) for m in converted]
            )

    async def pop(self, session_id: str) -> Popped:
        """Take back the last item the Conversation shows → it, the message hidden and the copy
        kept of the rest of it (``item`` null: nothing to take back)."""
        async with unit_of_work(self._db) as db:
            sessions = SessionRepository(db)
            session = await sessions.require(session_id, for_update=True)
            await require_idle(db, session_id, "changed")
            active = await load_active(db, session)
            view = active.view
            repository = MessageRepository(db)
            answer = Popped()
            for row in reversed(active.stored):
                view = view.hiding(row.sequence)
                if row.role == "tool":
                    await repository.reopen_answered_call(session_id, row.sequence)
                await repository.release_open_calls(session_id, row.sequence, only=True)
                items = message_items({"role": row.role, "content": row.content})
                if not items:
                    continue  # nothing of it reached the model: hide it and look further
                rest = _without_last_item(row.content)
                kept = None
                if rest is not None:
                    [kept] = await self._messages.append_in(
                        db, session_id, [(row.role, row.kind, rest)]
                    )
                answer = Popped(items[-1], row, kept)
                break
            session.conversation_view = view.to_json()
            return answer

    async def new_epoch(self, session_id: str) -> int:
        """Hide every stored message and checkpoint: the Conversation starts empty. → The
        sequence every message up to which is hidden."""
        async with unit_of_work(self._db) as db:
            session = await SessionRepository(db).require(session_id, for_update=True)
            await require_idle(db, session_id, "cleared")
            last = await MessageRepository(db).last_sequence(session_id) or 0
            latest = await CompactionRepository(db).latest(session_id)
            view = conversation_view_of(session).new_epoch(last, latest.sequence if latest else 0)
            await MessageRepository(db).release_open_calls(session_id, last, only=False)
            session.conversation_view = view.to_json()
            return last


def _without_last_item(content: list[Block]) -> list[Block] | None:
    """An answer's blocks without those of its last Responses item (``None`` when nothing the
    model would see is left): its last call, else its text, else its last reasoning item."""
    calls = [b for b in content if b["type"] == "tool_call"]
    if calls:
        rest = [b for b in content if b is not calls[-1]]
    elif any(b["type"] in ("text", "data") for b in content):
        rest = [b for b in content if b["type"] not in ("text", "data")]
    else:
        reasoning = [b for b in content if _is_reasoning(b)]
        rest = [b for b in content if b is not reasoning[-1]] if reasoning else []
        if not any(_is_reasoning(b) for b in rest):
            rest = []  # the thinking text was that item's summary
    if not message_items({"role": "assistant", "content": rest}):
        return None
    return rest


def _is_reasoning(block: Block) -> bool:
    return block["type"] == "provider_opaque" and block["driver"] == RESPONSES_DRIVER
