"""How a turn's runner stops: ``TurnEnded`` (an outcome to write) and ``TurnLost`` (the turn
is no longer this runner's), and the shapes the runner's steps hand each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelResponse
from app.services.turns.calls import CallEntry
from app.storage.models import AgentSession

__all__ = ["Outcome", "Ready", "Stored", "TurnEnded", "TurnLost", "failed", "internal_failure"]

# A terminal turn's ``outcome``: ``{final_text}`` (completed), ``{code, message}`` (failed) or
# ``{}`` (cancelled; spec §6).
Outcome = dict[str, str | None]


class TurnLost(Exception):
    """The turn is no longer running under this runner (finished or interrupted elsewhere)."""


@dataclass
class TurnEnded(Exception):
    status: str  # completed | failed | cancelled
    code: str | None = None
    message: str | None = None
    final_text: str | None = None
    # Calls of the last response that still need a result (written before the turn ends).
    entries: list[CallEntry] = field(default_factory=list)
    # The last model response when it is not stored yet: stored in the step that ends the turn.
    response: Stored | None = None

    def outcome(self) -> Outcome:
        if self.status == "completed":
            return {"final_text": self.final_text or ""}
        if self.status == "failed":
            return {"code": self.code, "message": self.message}
        return {}


# The next model call's request, and the session row it was prepared from.
Ready = tuple[PreparedModelCall, AgentSession]
# A model response, the request it answered (as sent) and that call's index, to be stored.
Stored = tuple[ModelResponse, PreparedModelCall, int]


def internal_failure(turn_id: str) -> str:
    # What the caller sees of an unexpected failure: never its text (SQL, driver messages and
    # file paths stay in the log, with the traceback, under the turn's id).
    return (
        f"persistence error: turn {turn_id} stopped on an internal error (logged with the "
        "turn id); start a new turn"
    )


def failed(code: str, message: str, entries: list[CallEntry] | None = None) -> TurnEnded:
    return TurnEnded("failed", code=code, message=message, entries=entries or [])
