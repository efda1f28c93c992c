"""JSON at the speed of orjson wherever the service produces, stores or counts bytes.

The core is standard library only (``app.core.content.compact_json`` is the reference form of
spec §3.1: compact, non-ASCII written as itself); this module is what the layers around it use
instead, with the reference as the fallback for whatever orjson does not take:

- ``dumps`` — compact JSON bytes for answers, stored columns and logs. orjson's output, which is
  the reference form for every value but floats in a few ranges (orjson writes ``1.25e-5`` as
  ``0.0000125`` and ``1e-7`` as ``1e-7`` where ``json`` writes ``1.25e-05``, ``1e-07``) and
  non-finite floats (``null``, where ``json`` writes ``NaN``); both read back as the same value.
  Values orjson refuses (integers past 64 bits, keys that are not strings, nesting past 254
  levels) take the reference form.
- ``spec_bytes`` — exactly ``compact_json(value).encode()``: what the estimate counts and what
  a provider is sent. orjson's bytes are used when the value holds no float (then the two forms
  are the same, which ``tests/test_fastjson.py`` checks property by property), else the reference.
- ``loads`` — pydantic-core's reader (jiter; orjson's would turn integers past 64 bits into
  floats), falling back to the standard reader for what it refuses (a lone surrogate escape,
  nesting past 200 levels), so every stored value reads back exactly as before.
- ``ESTIMATE`` — the core's estimate counter (same name, same figures) measuring with
  ``spec_bytes``. Content blocks hold floats only in free-form payloads (``provider_opaque``),
  so only those are looked through; every other block is strings by its schema (spec §1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic_core import from_json

from app.core import jsontext
from app.core.content import Block, compact_json, content_without_artifacts
from app.core.counting import EstimateCounter

__all__ = [
    "ESTIMATE",
    "FastEstimateCounter",
    "content_bytes",
    "dumps",
    "has_float",
    "loads",
    "spec_bytes",
    "strings_only_bytes",
]

# datetime/dataclass values are not JSON for the reference encoder: refuse them here too.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_orjson_dumps = orjson.dumps
_EncodeError = orjson.JSONEncodeError


def _reference(value: Any) -> bytes:
    return compact_json(value).encode("utf-8")


def dumps(value: Any) -> bytes:
    """Compact JSON bytes (non-ASCII as itself), floats possibly in orjson's notation."""
    try:
        return _orjson_dumps(value, option=_OPTIONS)
    except _EncodeError:
        return _reference(value)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The value of a JSON text, as the standard reader gives it."""
    if isinstance(data, memoryview):
        data = bytes(data)
    try:
        return from_json(data)
    except ValueError:
        return jsontext.loads(data)  # the standard reader, at any depth


def has_float(value: Any) -> bool:
    """Whether a float is anywhere in ``value`` (lists, tuples and dict values looked through).

    The leaves JSON is mostly made of (strings, ints, booleans, ``None``) are passed over where
    they are met instead of going through the stack. It runs on every stored JSON column and
    every provider body (the top function by own time in a turn's profile): a live update's
    payload takes half the time it did, a tool list's schemas four fifths (``timeit``)."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        kind = type(current)
        if kind is dict:
            items = current.values()
        elif kind is list or kind is tuple:
            items = current
        else:
            if kind is float or isinstance(current, float):  # or a subclass
                return True
            continue
        for item in items:
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is float:
                return True
            push(item)
    return False


def spec_bytes(value: Any) -> bytes:
    """Exactly ``compact_json(value).encode()`` (spec §3.1), as fast as orjson when it can be."""
    if has_float(value):
        return _reference(value)
    try:
        return _orjson_dumps(value, option=_OPTIONS)
    except _EncodeError:
        return _reference(value)


def _strings_only(content: Sequence[Any]) -> bool:
    """Whether ``content`` is blocks whose fields are strings by their schema (spec §1): no
    float to look for, so orjson's bytes are the reference bytes."""
    for block in content:
        kind = block.get("type") if type(block) is dict else None
        if kind not in _STRING_BLOCKS or (kind == "tool_result" and "artifacts" in block):
            return False
    return True


# Blocks whose fields are strings, None and lists of such blocks only (spec §1). Not
# ``provider_opaque`` (a free-form payload) nor a tool result's artifacts (free-form payloads).
_STRING_BLOCKS = frozenset({"text", "thinking", "data", "tool_call", "tool_result"})


def content_bytes(content: Sequence[Any]) -> bytes:
    """``spec_bytes`` of a content list, without looking for floats where blocks have none
    (any other list, a tool list for one, takes ``spec_bytes``)."""
    if not _strings_only(content):
        return spec_bytes(content)
    try:
        return _orjson_dumps(content, option=_OPTIONS)
    except _EncodeError:
        return _reference(content)


def strings_only_bytes(content: Sequence[Any]) -> bytes | None:
    """``content_bytes`` of a content list whose blocks are strings by their schema (then also
    what the estimate measures: no artifact to remove); ``None`` for any other list."""
    # ``_strings_only``, written out: this runs once per message measured.
    for block in content:
        kind = block.get("type") if type(block) is dict else None
        if kind not in _STRING_BLOCKS or (kind == "tool_result" and "artifacts" in block):
            return None
    try:
        return _orjson_dumps(content, option=_OPTIONS)
    except _EncodeError:
        return _reference(content)


class FastEstimateCounter(EstimateCounter):
    """``app.core.counting.ESTIMATE`` with the bytes made by orjson: the same figures."""

    def measure_content(self, content: Sequence[Block]) -> int:
        # One look at the blocks and one orjson call for the usual message (this runs once per
        # message without a stored figure); anything else takes the general way.
        data = strings_only_bytes(content)
        if data is None:
            return len(content_bytes(content_without_artifacts(content)))
        return len(data)

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        # ``measure_content`` (the role is not counted: spec §3.1) with its usual case written
        # out: a prepare of a conversation never seen runs this for every message, and the two
        # calls it saves were ~0.2 µs a message, ~5 % of a 1 000-message prepare.
        for block in content:
            kind = block.get("type") if type(block) is dict else None
            if kind not in _STRING_BLOCKS or (kind == "tool_result" and "artifacts" in block):
                return self.measure_content(content)
        try:
            return len(_orjson_dumps(content, option=_OPTIONS))
        except _EncodeError:
            return self.measure_content(content)

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return len(spec_bytes(list(tools))) if tools else 0


ESTIMATE = FastEstimateCounter()
