"""Hypothesis strategies for the large request bodies: prepare, token counts and appends.

Every object is drawn valid, then, some of the time, spoiled in one way a client could spoil
it: a key dropped, an unknown key added, a value of another type (``3.0`` for an integer,
``null``, a string, a list, ``NaN``), the object replaced by such a value. Strings take any
Unicode (NUL and astral characters included; lone surrogates only where asked), integers cross
every bound the schemas state, free-form payloads nest and hold floats and huge integers.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "APPEND_BODIES",
    "PREPARE_BODIES",
    "TOKEN_COUNT_BODIES",
    "encoded",
    "prepare_bodies",
]

TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=6) | st.sampled_from(
    ["", " ", "\x00", "ü界😀", "a\\u0000"]
)
ODD = st.sampled_from(
    [None, True, False, 0, 1, -1, 3.0, 2.5, "", "x", [], {}, 2**53, 2**53 - 1, 2**70]
) | st.just(float("nan"))
INTEGERS = st.sampled_from([0, 1, 2, 7, 2**31 - 1, 2**31, 2**53 - 1, 2**53, -1]) | st.integers()


def _variants(value: dict[str, Any]) -> st.SearchStrategy[Any]:
    keys = sorted(value)
    options: list[st.SearchStrategy[Any]] = [st.just({**value, "unknown": 1}), ODD]
    if keys:
        options.append(
            st.sampled_from(keys).map(lambda k: {x: v for x, v in value.items() if x != k})
        )
        options.append(
            st.tuples(st.sampled_from(keys), ODD).map(lambda kv: {**value, kv[0]: kv[1]})
        )
    return st.one_of(options)


def mostly(valid: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> Any:
    """``valid`` 29 times in 30, else ``other``: a body of a few dozen objects is then often
    valid throughout, and often spoiled in one place."""
    # Not ``one_of`` of 29 copies, which Hypothesis reads as one branch of two; and not
    # ``i == 0``, which it draws more often than 1 in 30 (it likes the bounds).
    return st.integers(0, 29).flatmap(lambda i: other if i == 17 else valid)


_DEEP: Any = "deep"
for _ in range(66):  # past the 64 levels free-form JSON may nest (app.core.limits.json_values)
    _DEEP = [_DEEP]
JSON_VALUES = mostly(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.sampled_from([1e-05, -0.0, 1e16, float("inf")])
        | TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=8,
    ),
    st.just(_DEEP),
)


def spoiled(valid: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """``valid`` as drawn most of the time, else spoiled once."""
    return mostly(valid, valid.flatmap(_variants))


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> Any:
    """An object with the ``required`` keys and some of the ``optional`` ones (strategies)."""
    return spoiled(st.fixed_dictionaries(required, optional=optional or {}))


def _type(name: str) -> st.SearchStrategy[str]:
    return mostly(st.just(name), st.sampled_from(["", "Text", "unknown"]))


MAYBE_TEXT = st.none() | TEXT
# A field that takes one character at least (an id, a name, a URL).
NAME = mostly(st.text(min_size=1, max_size=6), st.just(""))
SOURCE = st.one_of(
    obj({"source_type": st.just("url"), "url": NAME}, {"media_type": MAYBE_TEXT}),
    obj({"source_type": st.just("base64"), "data": NAME}, {"media_type": MAYBE_TEXT}),
    obj({"source_type": _type("file_id"), "id": NAME}),
)
TEXT_BLOCK = obj({"type": _type("text"), "text": TEXT})
DATA_BLOCK = obj({"type": st.just("data"), "source": SOURCE}, {"name": MAYBE_TEXT})
ARGUMENTS = mostly(TEXT | JSON_VALUES.map(json.dumps), st.just("[" * 70) | JSON_VALUES)
ARTIFACT = obj(
    {"kind": NAME | st.just("file_change")},
    {"payload": JSON_VALUES | st.fixed_dictionaries({"path": TEXT}, optional={"undone": ODD})},
)
TOOL_RESULT = obj(
    {
        "type": st.just("tool_result"),
        "id": NAME,
        "output": st.lists(mostly(TEXT_BLOCK | DATA_BLOCK, ODD), max_size=2),
    },
    {
        "name": TEXT,
        "state": mostly(
            st.sampled_from(["success", "error", "interrupted", "denied"]), st.just("ok")
        ),
        "artifacts": st.lists(ARTIFACT, max_size=2),
    },
)
OTHER_BLOCK = st.one_of(
    TEXT_BLOCK,
    obj({"type": st.just("thinking"), "thinking": TEXT}),
    DATA_BLOCK,
    obj({"type": st.just("tool_call"), "id": NAME, "name": NAME, "input": ARGUMENTS}),
    obj(
        {"type": st.just("provider_opaque"), "driver": TEXT, "kind": TEXT},
        {"payload": JSON_VALUES},
    ),
)
BLOCK = mostly(OTHER_BLOCK, TOOL_RESULT)
CONTENT = st.lists(BLOCK, max_size=3)
ROLE = mostly(st.sampled_from(["user", "assistant", "tool", "system"]), st.just("robot"))
KIND = mostly(
    st.sampled_from(["normal", "skill_instruction", "agent_message", "world_state"]), st.just("x")
)
SEQUENCE = mostly(
    st.none() | st.integers(1, 2**53 - 1), INTEGERS | st.sampled_from([3.0, 2.5, True, "3"])
)
ORIGIN = mostly(
    obj({}, {"type": st.just("real"), "message_id": MAYBE_TEXT, "sequence": SEQUENCE}),
    obj(
        {
            "type": st.just("synthetic"),
            "compaction_id": TEXT,
            "reason": st.sampled_from(["compaction_summary", "system_reminder", "x"]),
        },
        {"source_message_id": MAYBE_TEXT, "source_sequence": SEQUENCE},
    ),
)
# Tool results only in tool messages, one each (the store's rule), but for the odd one.
ROLE_CONTENT = mostly(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system"]), "content": CONTENT}
    )
    | st.fixed_dictionaries({"role": st.just("tool"), "content": st.tuples(TOOL_RESULT).map(list)}),
    st.fixed_dictionaries({"role": ROLE, "content": st.lists(TOOL_RESULT | BLOCK, max_size=3)}),
)
MESSAGE = spoiled(
    st.tuples(
        ROLE_CONTENT, st.fixed_dictionaries({}, optional={"kind": KIND, "origin": ORIGIN})
    ).map(lambda rc: {**rc[0], **rc[1]})
)
TOOL = obj(
    {"name": NAME},
    {"description": TEXT, "input_schema": mostly(st.dictionaries(TEXT, JSON_VALUES), JSON_VALUES)},
)
TOKENS = mostly(st.integers(1, 2**31 - 1), INTEGERS)
MODEL = obj(
    {"context_window_tokens": TOKENS, "max_output_tokens": TOKENS},
    {
        "max_reasoning_tokens": st.none() | TOKENS,
        "accepts_data_blocks": mostly(st.booleans(), ODD),
        "token_counter": mostly(st.just("estimate"), st.just("x")),
        "prompt_caching": mostly(st.sampled_from(["auto", "off"]), st.just("on")),
        "reasoning": mostly(st.booleans(), ODD),
        "model_name": MAYBE_TEXT,
    },
)
# A window the pipeline accepts, so that valid bodies get as far as an answer.
GOOD_MODEL = st.fixed_dictionaries(
    {"context_window_tokens": st.just(100_000), "max_output_tokens": st.just(1_000)},
    optional={"model_name": TEXT, "token_counter": st.just("estimate")},
)


def prepare_bodies(model: st.SearchStrategy[Any] = MODEL) -> Any:
    """Prepare bodies (``model`` the strategy of their inline model), mostly with exactly one
    of ``model`` and ``model_id``."""
    models = mostly(
        st.fixed_dictionaries({"model": model}) | st.fixed_dictionaries({"model_id": TEXT}),
        st.fixed_dictionaries({}, optional={"model": st.none() | model, "model_id": MAYBE_TEXT}),
    )
    rest = st.fixed_dictionaries(
        {},
        optional={
            "system_context": st.lists(obj({"key": TEXT, "content": CONTENT}), max_size=2),
            "conversation": st.lists(MESSAGE, max_size=6),
            "tools": st.lists(TOOL, max_size=2),
            "tool_result_pruning": obj(
                {}, {"through_sequence": SEQUENCE, "spill_directory": MAYBE_TEXT}
            ),
            "encode": mostly(
                st.sampled_from([None, "openai_chat", "anthropic_messages"]), st.just("x")
            ),
            "previous_request_digest": mostly(st.none(), TEXT | st.just("pc1.AQ")),
        },
    )
    return spoiled(st.tuples(models, rest).map(lambda mr: {**mr[1], **mr[0]}))


PREPARE_BODIES = prepare_bodies()
TOKEN_COUNT_BODIES = obj(
    {},
    {
        "counter": mostly(st.sampled_from([None, "estimate"]), st.just("x")),
        "text": MAYBE_TEXT,
        "content": st.none() | CONTENT,
        "prepare": st.none() | PREPARE_BODIES,
    },
)
APPEND_BODIES = obj(
    {
        "messages": st.lists(
            spoiled(
                st.tuples(ROLE_CONTENT, st.fixed_dictionaries({}, optional={"kind": KIND})).map(
                    lambda rc: {**rc[0], **rc[1]}
                )
            ),
            min_size=0,
            max_size=6,
        )
    }
)


def encoded(bodies: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """The bodies as JSON bytes, written compact or spaced, non-ASCII escaped or not."""
    return st.tuples(bodies, st.booleans(), st.booleans()).map(
        lambda b: json.dumps(
            b[0], ensure_ascii=b[1], separators=(",", ":") if b[2] else (", ", ": ")
        ).encode()
    )
