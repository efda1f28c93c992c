"""An OpenAI Agents SDK ``Session`` kept by ctxsvc: ``CtxsvcSession``.

Give it to ``Runner.run(..., session=...)`` like the SDK's own sessions. The history lives in a
ctxsvc session, so what the agent's model reads is the service's prepared context:

- ``get_items`` is the session prepare with ``encode="openai_responses"``: the Conversation as
  Responses input items, after World State, pruning and, when the model's line is reached, a
  compaction decided by the service (its summary items replace the history; nothing is deleted);
- ``add_items`` appends items (user and assistant messages, reasoning, function calls and their
  outputs; anything else, such as a hosted tool's call, is refused with ``InvalidInputError``);
- ``pop_item`` takes back the last item: the service hides it, never deletes it;
- ``clear_session`` starts a new epoch: the Conversation starts empty, the old messages stay
  stored (and readable: ``get_messages``, transcripts).

The agent's instructions and tools are the SDK's own: the service's system prompt and tools
(``agent`` at creation) are not part of the items. This module imports nothing of the Agents
SDK (the protocol is structural): install ``ctxsvc-client[agents]`` to get it alongside.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import httpx

from ctxsvc_client._async_client import AsyncClient
from ctxsvc_client._callkit import session_path
from ctxsvc_client._calls import Call

__all__ = ["CtxsvcSession"]

# The format of the items the service reads and writes.
_FORMAT: Final[Literal["openai_responses"]] = "openai_responses"
# Items of the prepared request that are not Conversation items: the System Context.
_INSTRUCTION_ROLES = frozenset({"system", "developer"})


def _json(response: httpx.Response) -> Any:
    return response.json()


class CtxsvcSession:
    """The OpenAI Agents SDK's ``Session`` protocol over a ctxsvc session."""

    session_settings: Any = None  # the SDK's SessionSettings; None: its defaults

    def __init__(self, session_id: str, client: AsyncClient) -> None:
        self.session_id = session_id
        self._client = client

    @classmethod
    async def create(
        cls,
        client: AsyncClient,
        *,
        model_id: str,
        summary_model_id: str | None = None,
        system_prompt: str = "You are a helpful agent.",
        title: str | None = None,
    ) -> CtxsvcSession:
        """A new ctxsvc session for an agent: ``model_id`` sets the window and the line where
        the service compacts, ``summary_model_id`` the model that writes the summaries."""
        session = await client.create_session(
            model_id=model_id,
            summary_model_id=summary_model_id,
            title=title,
            agent={"system_prompt": system_prompt, "tools": []},
        )
        return cls(session.id, client)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The prepared Conversation as Responses input items (the latest ``limit``)."""
        prepared = await self._client.prepare_session(self.session_id, encode=_FORMAT)
        payload = prepared.provider_payload or {}
        items = [
            item
            for item in payload.get("input", [])
            if not (
                item.get("type", "message") == "message" and item.get("role") in _INSTRUCTION_ROLES
            )
        ]
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (all or nothing)."""
        if not items:
            return
        body = {"format": _FORMAT, "items": [dict(item) for item in items]}
        await self._client.send(
            Call("POST", session_path(self.session_id, "items"), _json, json=body)
        )

    async def pop_item(self) -> Any | None:
        """Take back the most recent item (hidden by the service, never deleted); ``None``
        when there is nothing to take back."""
        url = session_path(self.session_id, "items", "pop")
        answer = await self._client.send(Call("POST", url, _json, json={"format": _FORMAT}))
        return answer["item"]

    async def clear_session(self) -> None:
        """Start a new epoch: an empty Conversation; nothing is deleted."""
        await self._client.send(Call("POST", session_path(self.session_id, "epochs"), _json))
