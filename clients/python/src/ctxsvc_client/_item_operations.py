"""Operations of a session kept as OpenAI Responses items (``ctxsvc_client.agents`` uses them):
append items, take back the last one, start a new epoch. Nothing stored is ever deleted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from ctxsvc_client._callkit import list_of, model_of, session_path
from ctxsvc_client._calls import Call
from ctxsvc_client._models import AppendedMessage, _Result

__all__ = ["EpochStarted", "ItemTakenBack", "add_items", "new_epoch", "pop_item"]

ItemFormat = Literal["openai_responses"]


class ItemTakenBack(_Result):
    item: dict[str, Any] | None = Field(description="The item taken back; None: nothing was.")
    hidden: AppendedMessage | None
    kept: AppendedMessage | None


class EpochStarted(_Result):
    epoch_after_sequence: int


def add_items(
    session_id: str,
    items: Sequence[Mapping[str, Any]],
    *,
    format: ItemFormat = "openai_responses",
) -> Call[list[AppendedMessage]]:
    """Append items as messages, all or nothing; the stored messages' ids and sequences."""
    # Never repeated after it may have reached the service: a second append stores twice.
    body = {"format": format, "items": [dict(item) for item in items]}
    url = session_path(session_id, "items")
    return Call("POST", url, list_of(AppendedMessage, "messages"), json=body)


def pop_item(
    session_id: str,
    *,
    format: ItemFormat = "openai_responses",
) -> Call[ItemTakenBack]:
    """Take back the last item of the Conversation (hidden, never deleted)."""
    url = session_path(session_id, "items", "pop")
    return Call("POST", url, model_of(ItemTakenBack), json={"format": format})


def new_epoch(session_id: str) -> Call[EpochStarted]:
    """Start a new epoch: the Conversation starts empty; nothing is deleted."""
    return Call("POST", session_path(session_id, "epochs"), model_of(EpochStarted))
