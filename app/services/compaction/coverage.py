"""What a summary written by a caller's own model covers (spec §7.8, §17).

``docs/decisions.md``: "A posted summary covers what its request covered".

A caller fetches the summary request (``GET .../compactions/request``), its model works for a
while, and meanwhile other messages may be appended. The request says what it covers
(``through_message_sequence``, its last message) and the service remembers the last request it
served per session (that sequence and the checkpoint it was built on). The posted summary is
installed over what it covers, never over newer messages: they stay after the install boundary,
in the active conversation.

- A post that names ``through_message_sequence`` covers that message and the ones before it.
  It is refused when a checkpoint installed meanwhile covers more (``compaction_conflict``), or,
  for the request last served, when any checkpoint was installed since it was built.
- A post that names nothing covers the last request served, provided nothing was appended since
  (and no checkpoint installed since); otherwise the service cannot know what the summary covers
  and refuses it (409 ``summary_coverage_unknown``).
- ``expected_through_message_sequence`` keeps its meaning: the conversation must still end there
  (409 ``conversation_changed``).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction import validate_summary
from app.core.errors import Conflict, InvalidInput, ServiceError
from app.storage.models import AgentSession
from app.storage.repositories.compactions import CompactionRepository

__all__ = ["PostedSummary", "conversation_changed"]


class PostedSummary:
    """A summary posted by a caller's own model, and what the post said it covers:
    ``through_message_sequence`` and/or ``expected_through_message_sequence`` (either may be
    absent). ``load_source`` calls it once the session may be compacted at all (it exists, no
    turn runs, it has messages): the summary is validated (``text``), then what it covers is
    decided, so a broken summary is refused whatever it covers."""

    __slots__ = ("expected", "summary", "text", "through")

    def __init__(self, summary: str, through: int | None, expected: int | None) -> None:
        self.summary = summary
        self.through = through
        self.expected = expected
        self.text: str | None = None  # the summary as stored, once validated
        if None not in (through, expected) and through != expected:
            # Its own code: two fields that must be equal is a rule no JSON Schema can state.
            raise InvalidInput(
                "coverage_mismatch",
                f"through_message_sequence ({self.through}) and "
                f"expected_through_message_sequence ({self.expected}) disagree; send one of them",
            )

    @classmethod
    def of_post(
        cls, summary: str | None, through: int | None, expected: int | None
    ) -> tuple[PostedSummary | None, int | None]:
        """``(the posted summary, the expected end for the service's own summary)``: without
        ``summary`` the service summarizes the conversation as it is, so ``through`` has no
        meaning and is refused."""
        if summary is not None:
            return cls(summary, through, expected), None
        if through is not None:
            raise InvalidInput(
                "invalid_request",
                "through_message_sequence says what a posted summary covers; send it with "
                "`summary`, or leave both out to let the service summarize the conversation",
            )
        return None, expected

    async def __call__(self, db: AsyncSession, session: AgentSession, last: int) -> int:
        """The last message the summary covers (``load_source``'s ``Coverage``)."""
        self.text = validate_summary(self.summary, finish_reason="stop", has_tool_calls=False)
        if self.expected is not None and self.expected != last:
            raise conversation_changed(self.expected, last)
        named = self.through if self.through is not None else self.expected
        served = session.summary_request_through_sequence
        if named is None:
            named = _served_and_current(session.id, served, last)
        elif named > last:
            # Its own code: which sequences exist is stored state, no schema can state it.
            raise InvalidInput(
                "coverage_out_of_range",
                f"through_message_sequence {named} names no message: the conversation ends at "
                f"message {last}",
            )
        latest = await CompactionRepository(db).latest(session.id)
        if latest is not None and latest.replaced_through_message_sequence > named:
            raise _newer_checkpoint(latest.compaction_id, named)
        latest_id = latest.compaction_id if latest is not None else None
        if served == named and session.summary_request_compaction_id != latest_id:
            # The request for ``named`` was built on another checkpoint (or none): a rewind or
            # another compaction came in between, and the summary would undo it.
            raise _newer_checkpoint(latest_id, named)
        return named


def _served_and_current(session_id: str, served: int | None, last: int) -> int:
    if served is None:
        raise Conflict(
            "summary_coverage_unknown",
            "no summary request was served for this session, so what the summary covers is "
            f"unknown; fetch GET /v1/sessions/{session_id}/compactions/request, answer it, and "
            "post the summary with its through_message_sequence",
            through_message_sequence=last,
        )
    if served != last:
        raise Conflict(
            "summary_coverage_unknown",
            f"messages {served + 1} to {last} were appended after the last summary request "
            f"(through message {served}) was served; post the summary with the "
            "through_message_sequence of the request it answers (the newer messages stay in "
            "the conversation after it), or fetch the request again",
            served_through_message_sequence=served,
            through_message_sequence=last,
        )
    return served


def _newer_checkpoint(compaction_id: str | None, through: int) -> ServiceError:
    return Conflict(
        "compaction_conflict",
        f"checkpoint {compaction_id} was installed after the summary request through message "
        f"{through} was served; the summary would not cover the conversation in force, so it "
        "was not installed; fetch the summary request again and summarize that",
        compaction_id=compaction_id,
    )


def conversation_changed(expected: int, actual: int) -> ServiceError:
    return Conflict(
        "conversation_changed",
        f"the summary was written for the conversation through message {expected}, but it now "
        f"ends at message {actual}; fetch the summary request again and summarize that",
        expected_through_message_sequence=expected,
        through_message_sequence=actual,
    )
