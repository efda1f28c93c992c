"""JSON text that any stored value can go through, however deeply it nests.

The standard ``json`` codec recurses once per nesting level and raises ``RecursionError`` at
about a thousand levels *minus the caller's own stack depth*. A value stored from a shallow stack
(an append) could then fail to load, or to be written back out, from a deeper one (a turn step,
a streamed response): one stored row would break every later read of its session. So:

- ``dumps`` and ``loads`` are the standard codec (C speed, the very same bytes and values), and
  only when it runs out of stack they redo the work with a loop over an explicit stack, which has
  no depth limit. Nothing changes for the values the service sees every day.
- ``loads_arguments`` is the one reading of JSON a model wrote as tool-call arguments: strict
  JSON (no ``NaN``, ``Infinity`` or numbers that overflow to them: providers refuse those in a
  body) nested at most ``MAX_ARGUMENT_DEPTH`` levels. A fixed bound, not the stack's, so the
  same arguments are accepted or refused wherever they are read (the turn's tool checks, the
  encodings, the plan and history tools).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from json.decoder import (  # type: ignore[attr-defined]  # both exist, typeshed omits them
    WHITESPACE,
    JSONDecodeError,
    scanstring,
)
from json.encoder import encode_basestring
from json.scanner import NUMBER_RE
from typing import Any, Final

__all__ = ["MAX_ARGUMENT_DEPTH", "dumps", "loads", "loads_arguments"]

MAX_ARGUMENT_DEPTH = 128
"""Deepest nesting of tool-call arguments read as JSON (an object is level 1). Real tools take
a few levels; a model that writes more is answered as for arguments that are not JSON."""

# Built once (``json.dumps`` builds an encoder per call with these options).
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_COMPACT_SORTED: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` at any depth."""
    try:
        return (_COMPACT_SORTED if sort_keys else _COMPACT).encode(value)
    except RecursionError:
        return _encode(value, sort_keys=sort_keys)


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)`` at any depth."""
    try:
        return json.loads(text)
    except RecursionError:
        if not isinstance(text, str):
            text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
        return _Decoder(text, max_depth=None, finite_only=False).value()


def loads_arguments(raw: str) -> Any:
    """Tool-call arguments as a value; ``ValueError`` when they are not strict JSON or nest
    deeper than ``MAX_ARGUMENT_DEPTH`` (no value that deep is built)."""
    if raw.count("[") + raw.count("{") <= MAX_ARGUMENT_DEPTH:
        # Cannot nest deeper than its brackets: the C decoder, well within the stack.
        return json.loads(raw, parse_constant=_not_json, parse_float=_finite)
    return _Decoder(raw, max_depth=MAX_ARGUMENT_DEPTH, finite_only=True).value()


def _not_json(constant: str) -> Any:
    # json.loads accepts NaN and ±Infinity, which are not JSON (RFC 8259 §6).
    raise ValueError(f"{constant} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


# -- decoding without recursion ---------------------------------------------------------------

_CONSTANTS: Final[dict[str, Any]] = {"null": None, "true": True, "false": False}
_NON_FINITE: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_skip = WHITESPACE.match
_number = NUMBER_RE.match


class _Decoder:
    """``json.loads`` over one string with an explicit stack of open containers."""

    def __init__(self, text: str, *, max_depth: int | None, finite_only: bool) -> None:
        self.s = text
        self.max_depth = max_depth
        self.finite_only = finite_only  # arguments: no NaN / Infinity, no overflowing numbers

    def error(self, message: str, at: int) -> JSONDecodeError:
        return JSONDecodeError(message, self.s, at)

    def value(self) -> Any:
        s = self.s
        stack: list[tuple[dict[str, Any] | list[Any], str | None]] = []
        at = _skip(s, 0).end()
        while True:
            char = s[at : at + 1]
            if char in ("{", "["):
                if self.max_depth is not None and len(stack) >= self.max_depth:
                    raise ValueError(f"the JSON nests deeper than {self.max_depth} levels")
                at = _skip(s, at + 1).end()
                if char == "{":
                    if s[at : at + 1] == "}":
                        value: Any = {}
                        at += 1
                    else:
                        key, at = self.key(at)
                        stack.append(({}, key))
                        continue
                elif s[at : at + 1] == "]":
                    value, at = [], at + 1
                else:
                    stack.append(([], None))
                    continue
            else:
                value, at = self.scalar(at)
            # Put the value in its container; close every container that ends after it.
            while True:
                if not stack:
                    end = _skip(s, at).end()
                    if end != len(s):
                        raise self.error("Extra data", end)
                    return value
                container, open_key = stack[-1]
                if isinstance(container, dict):
                    assert open_key is not None
                    container[open_key] = value
                else:
                    container.append(value)
                at = _skip(s, at).end()
                char = s[at : at + 1]
                if char == ",":
                    at = _skip(s, at + 1).end()
                    if isinstance(container, dict):
                        key, at = self.key(at)
                        stack[-1] = (container, key)
                    break
                if char == ("}" if isinstance(container, dict) else "]"):
                    stack.pop()
                    value, at = container, at + 1
                    continue
                raise self.error("Expecting ',' delimiter", at)
            at = _skip(s, at).end()

    def key(self, at: int) -> tuple[str, int]:
        """An object key and its colon at ``at``; the index of the value after them."""
        s = self.s
        if s[at : at + 1] != '"':
            raise self.error("Expecting property name enclosed in double quotes", at)
        key, at = scanstring(s, at + 1, True)
        at = _skip(s, at).end()
        if s[at : at + 1] != ":":
            raise self.error("Expecting ':' delimiter", at)
        return key, _skip(s, at + 1).end()

    def scalar(self, at: int) -> tuple[Any, int]:
        s = self.s
        char = s[at : at + 1]
        if char == '"':
            text, end = scanstring(s, at + 1, True)
            return str(text), int(end)
        for word, constant in _CONSTANTS.items():
            if s.startswith(word, at):
                return constant, at + len(word)
        match = _number(s, at)
        if match is not None:
            integer, fraction, exponent = match.groups()
            end = match.end()
            if fraction or exponent:
                text = integer + (fraction or "") + (exponent or "")
                return (_finite(text) if self.finite_only else float(text)), end
            return int(integer), end
        for word, number in _NON_FINITE.items():
            if s.startswith(word, at):
                if self.finite_only:
                    raise ValueError(f"{word} is not valid JSON")
                return number, at + len(word)
        raise self.error("Expecting value", at)


# -- encoding without recursion ---------------------------------------------------------------

_END: Final = object()


def _encode(value: Any, *, sort_keys: bool) -> str:
    """``_COMPACT.encode(value)`` with an explicit stack of open containers."""
    out: list[str] = []
    # Open containers: (their remaining members, is an object, id, first member still to come).
    stack: list[list[Any]] = []
    open_ids: set[int] = set()
    while True:
        if isinstance(value, str):
            out.append(encode_basestring(value))
        elif value is None:
            out.append("null")
        elif value is True:
            out.append("true")
        elif value is False:
            out.append("false")
        elif isinstance(value, int):
            out.append(int.__repr__(value))
        elif isinstance(value, float):
            out.append(_float(value))
        elif isinstance(value, list | tuple | dict):
            if id(value) in open_ids:
                raise ValueError("Circular reference detected")
            open_ids.add(id(value))
            is_object = isinstance(value, dict)
            members: Iterator[Any]
            if isinstance(value, dict):
                members = iter(sorted(value.items()) if sort_keys else value.items())
            else:
                members = iter(value)
            out.append("{" if is_object else "[")
            stack.append([members, is_object, id(value), True])
        else:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        while stack:
            frame = stack[-1]
            member = next(frame[0], _END)
            if member is _END:
                out.append("}" if frame[1] else "]")
                open_ids.discard(frame[2])
                stack.pop()
                continue
            if frame[3]:
                frame[3] = False
            else:
                out.append(",")
            if frame[1]:
                pair: tuple[Any, Any] = member  # type: ignore[assignment]  # (key, value)
                out.append(encode_basestring(_key(pair[0])) + ":")
                value = pair[1]
            else:
                value = member
            break
        else:
            return "".join(out)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    # The key conversions of ``json.dumps``.
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
