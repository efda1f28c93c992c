"""The digests a proxied history is matched by (spec §21.1): no stored message is read.

A request's *family* digest covers what must be equal for two histories to be one session's:
the tenant, the registered model id, the system prompt and the tools. Each caller message then
extends a *chain*: ``chain[i] = sha256(chain[i-1] ‖ message key)``, ``chain[0]`` the family, so
``chain[i]`` names the family and the first ``i`` messages at once.

A message's key is what a client echoes back of it, in a canonical form: the role, its text,
its tool calls (id, name, arguments as parsed JSON re-serialized with sorted keys, so that an SDK
that re-serializes arguments, as LangChain does, still matches), its tool results (id, state,
text) and its data blocks (their source). Thinking and provider-opaque blocks are left out:
some protocols never send them back (Chat Completions has no field for either).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from app.core.content import Block
from app.core.pipeline.prepared_call import ToolDefinition
from app.services.proxy.contract import ProxyMessage

__all__ = ["ChainCache", "chain_digests", "family_digest", "message_key"]


# One encoder for every key: ``json.dumps`` with options builds a new one on each call, which
# was a third of keying a 1 000-message request.
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def _canonical(value: Any) -> bytes:
    return _ENCODE(value).encode()


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # not JSON: compared as the text itself


def message_key(role: str, content: Sequence[Block]) -> bytes:
    """The canonical bytes of one message as a client echoes it back (module docstring)."""
    text: list[str] = []
    parts: list[Any] = []
    for block in content:
        b: Any = block  # read only
        kind = b["type"]
        if kind == "text":
            text.append(str(b["text"]))
        elif kind == "tool_call":
            parts.append(["call", b["id"], b["name"], _arguments(str(b["input"]))])
        elif kind == "tool_result":
            output = [str(o.get("text", "")) for o in b["output"] if o.get("type") == "text"]
            parts.append(["result", b["id"], b["state"], "".join(output)])
        elif kind == "data":
            parts.append(["data", b["source"]])
    return _canonical([role, "".join(text), parts])


def family_digest(
    tenant_id: str, model_id: str, system: str | None, tools: Sequence[ToolDefinition]
) -> str:
    tool_keys = [[t["name"], t.get("description", ""), t["input_schema"]] for t in tools]
    return hashlib.sha256(
        _canonical(["ctxsvc-proxy-1", tenant_id, model_id, system, tool_keys])
    ).hexdigest()


def chain_digests(family: str, keys: Sequence[bytes]) -> list[str]:
    """``chain[1..n]`` of the messages whose keys are ``keys`` (index 0 of the list is
    ``chain[1]``)."""
    chain: list[str] = []
    previous = bytes.fromhex(family)
    sha256 = hashlib.sha256
    for key in keys:
        previous = sha256(previous + sha256(key).digest()).digest()
        chain.append(previous.hex())
    return chain


class ChainCache:
    """Each family's last request (its messages and their chain), for the next request of the
    family, which usually repeats them and adds a few: only the messages after the common
    prefix are keyed and chained, so a call's digesting grows with what is new, not with the
    history (the prefix is compared as content, which is cheaper than keying it; equal content
    has an equal key). Bounded: the ``size`` families used last, holding ``max_messages``
    decoded messages in all (a request over that alone is not kept: its next call keys it
    whole, as before this cache). In-process only: a miss (a restart, another replica, another
    conversation of the family) only costs the full keying.
    """

    def __init__(self, size: int = 64, max_messages: int = 50_000) -> None:
        self._size = size
        self._max_messages = max_messages
        self._held = 0  # messages held by all families
        self._last: OrderedDict[str, tuple[list[ProxyMessage], list[str]]] = OrderedDict()

    def chain(self, family: str, messages: Sequence[ProxyMessage]) -> list[str]:
        """``chain_digests(family, [message_key(m) for m in messages])``, reusing the family's
        last request's chain for the prefix the two share."""
        reused = 0
        known: list[str] = []
        last = self._last.get(family)
        if last is not None:
            before, known = last
            limit = min(len(before), len(messages))
            # The same objects when the codec reused its last decoding (``_decoded``).
            while reused < limit and (
                messages[reused] is before[reused] or messages[reused] == before[reused]
            ):
                reused += 1
        start = known[reused - 1] if reused else family
        rest = [message_key(m.role, m.content) for m in messages[reused:]]
        chain = known[:reused] + chain_digests(start, rest)
        replaced = self._last.pop(family, None)
        if replaced is not None:
            self._held -= len(replaced[0])
        if len(messages) <= self._max_messages:
            self._last[family] = (list(messages), chain)
            self._held += len(messages)
        while len(self._last) > self._size or self._held > self._max_messages:
            self._held -= len(self._last.popitem(last=False)[1][0])
        return chain
