"""How deep and how large a JSON value the service accepts (spec §11.4).

The reasons: ``docs/api-notes.md``, "Limits on what a request may hold".

Python's JSON reader recurses once per nesting level and raises ``RecursionError`` somewhere near
a thousand levels, and every reader of stored content (encodings, prepare, compaction, the turn
runner) parses stored JSON again. A value accepted once is stored for ever (the store is append
only), so a value too deep to read would break its session for good: the limits are checked
where JSON enters, far below the depth any reader fails at.

The same two limits hold for every free-form JSON value the service accepts: JSON carried as text
(``tool_call.input``, tool arguments a model produced) and JSON values in bodies whose shape the
service does not define (``provider_opaque`` and artifact payloads, tool input schemas, scripted
model entries).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "json_text_problem",
    "json_value_problem",
]

# Nested arrays and objects a value may hold: 64 levels are far beyond any tool's arguments or
# schema and far below the ~1 000 where Python's reader fails.
MAX_JSON_DEPTH = 64
# Characters of a value's JSON text (compact for a value): 1 MiB, more than any model writes
# in one call (128 000 output tokens are about 512 000 characters).
MAX_JSON_CHARS = 1_048_576

_BRACKET = re.compile(r"[\[\]{}]")
_OPENING = frozenset("[{")


_TOO_DEEP = f"nests deeper than {MAX_JSON_DEPTH} levels of arrays and objects"


def _too_large(chars: int) -> str:
    return f"is {chars} characters of JSON, over the {MAX_JSON_CHARS}-character limit"


def json_text_problem(text: str) -> str | None:
    """Why JSON text (valid or not) is refused, or ``None``.

    The text need not be valid JSON (a model may produce broken arguments, which the turn
    answers with an ``invalid_arguments`` result); its bracket structure outside strings is
    what any reader would recurse into, so that is what is measured.
    """
    if len(text) > MAX_JSON_CHARS:
        return _too_large(len(text))
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:  # the usual case, at C speed
        return None
    # Drop escaped backslashes, then escaped quotes: the quotes left delimit strings exactly as
    # a JSON reader lexes them, and every other piece of the split lies outside a string.
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(unescaped.split('"')[0::2])
    depth = 0
    for bracket in _BRACKET.findall(outside):
        depth += 1 if bracket in _OPENING else -1
        if depth > MAX_JSON_DEPTH:
            return _TOO_DEEP
    return None


def _depth_problem(value: Any) -> str | None:
    # Iterative: a recursive walk would fail on the very values it is meant to refuse. Scalars
    # are told apart by their exact type first: ``isinstance`` against two classes for every
    # string of a schema or payload was half of this check's time.
    pending: list[tuple[Any, int]] = [(value, 0)]
    pop, push = pending.pop, pending.append
    while pending:
        node, depth = pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return _TOO_DEEP
        for child in children:
            if type(child) in _SCALARS:
                continue
            if isinstance(child, dict | list):
                push((child, depth))
    return None


# JSON's scalar types, exactly (a subclass of ``dict`` or ``list`` is never one of them).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_value_problem(value: Any) -> str | None:
    """Why a parsed JSON value is refused (too deep, too large, or not JSON), or ``None``."""
    problem = _depth_problem(value)
    if problem is not None:
        return problem
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        # Python's reader accepts NaN and ±Infinity (and 1e400 as infinity); they are not JSON
        # (RFC 8259 §6) and PostgreSQL's json type refuses them.
        return "holds NaN or an infinite number, which JSON cannot carry"
    if len(text) > MAX_JSON_CHARS:
        return _too_large(len(text))
    return None
