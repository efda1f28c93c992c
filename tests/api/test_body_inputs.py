"""The large bodies' own reading (``BodyInput.decode``, msgspec) never differs from the models'.

For any body: when ``decode`` takes it, the models take it too (``model_validate_json``, the
reading the route fell back to before) and give the very same input (``repr``: the same values
of the same types, dict keys in the same order), and the stateless prepare answers both with
the same bytes. What the models refuse, ``decode`` declines, so every error answer is the
models' (FastAPI's reading of them: ``tests/api/test_json_body.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import fastjson
from app.api.inputs.appends import AppendInput
from app.api.inputs.prepare import PrepareInput
from app.api.inputs.tokens import TokenCountInput
from app.api.jsonbody import BodyInput
from app.api.render.prepare import stateless_json
from app.api.schemas.prepare import PrepareBody
from app.api.schemas.sessions import AppendBody
from app.api.schemas.tokens import TokenCountBody
from app.core.errors import ServiceError
from app.core.limits.json_values import MAX_JSON_CHARS
from app.core.pipeline.prepared_call import PruningWatermark
from app.services.prepare import run_prepare
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from tests.api.body_strategies import (
    APPEND_BODIES,
    GOOD_MODEL,
    PREPARE_BODIES,
    TOKEN_COUNT_BODIES,
    encoded,
    prepare_bodies,
)

PROPERTY = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
READINGS: list[tuple[type[BodyInput[Any]], Any]] = [
    (PrepareInput, PrepareBody),
    (TokenCountInput, TokenCountBody),
    (AppendInput, AppendBody),
]


def model_reading(kind: type[BodyInput[Any]], model: Any, raw: bytes) -> Any:
    """The input the models give (``None``: they refuse the body)."""
    try:
        return kind.of(model.model_validate_json(raw))
    except Exception:  # a refusal of any kind: a ValidationError or the store's own rule
        return None


def assert_same_reading(kind: type[BodyInput[Any]], model: Any, raw: bytes) -> Any:
    taken = kind.decode(raw)
    if taken is not None:
        expected = model_reading(kind, model, raw)
        assert expected is not None, f"{kind.__name__} took a body the models refuse: {raw!r}"
        assert repr(taken) == repr(expected)
    return taken


def answer(body: PrepareInput) -> Any:
    """The stateless prepare's answer bytes for an inline model, or its error."""
    assert body.model is not None
    try:
        result = run_prepare(
            body.system_context,
            body.conversation,
            body.tools,
            body.model.to_core(),
            body.pruning,
            fastjson.ESTIMATE,
            model_name=body.model.model_name,
            previous_request_digest=body.previous_request_digest,
        )
        rendered = stateless_json(result, encode_as=body.encode)
    except ServiceError as error:
        return (error.code, error.detail)
    return fastjson.dumps(rendered)


@PROPERTY
@given(encoded(PREPARE_BODIES))
def test_a_prepare_body_taken_is_read_as_the_models_read_it(raw: bytes) -> None:
    assert_same_reading(PrepareInput, PrepareBody, raw)


@PROPERTY
@given(encoded(prepare_bodies(GOOD_MODEL)))
def test_a_prepare_body_taken_gets_the_models_answer(raw: bytes) -> None:
    taken = assert_same_reading(PrepareInput, PrepareBody, raw)
    if taken is not None and taken.model is not None:
        expected = model_reading(PrepareInput, PrepareBody, raw)
        assert answer(taken) == answer(expected)


@PROPERTY
@given(encoded(TOKEN_COUNT_BODIES))
def test_a_token_count_body_taken_is_read_as_the_models_read_it(raw: bytes) -> None:
    assert_same_reading(TokenCountInput, TokenCountBody, raw)


@PROPERTY
@given(encoded(APPEND_BODIES))
def test_an_append_body_taken_is_read_as_the_models_read_it(raw: bytes) -> None:
    assert_same_reading(AppendInput, AppendBody, raw)


@PROPERTY
@given(
    st.sampled_from(READINGS),
    st.binary(max_size=40) | encoded(PREPARE_BODIES),
    st.integers(0, 400),
)
def test_a_cut_or_garbled_body_is_never_taken_alone(
    reading: tuple[type[BodyInput[Any]], Any], raw: bytes, cut: int
) -> None:
    kind, model = reading
    assert_same_reading(kind, model, raw[:cut])


MODEL = {"context_window_tokens": 100_000, "max_output_tokens": 1_000}
TEXT = [{"type": "text", "text": "a"}]
RESULT = {"type": "tool_result", "id": "c", "output": []}


def _prepare(**fields: Any) -> bytes:
    return json.dumps({"model": MODEL, **fields}).encode()


def _opaque(payload: bytes) -> bytes:
    """A prepare body whose one block is a ``provider_opaque`` with this raw ``payload``."""
    return (
        b'{"model_id": "m", "conversation": [{"role": "user", "content": [{"type":'
        b' "provider_opaque", "driver": "d", "kind": "k", "payload": ' + payload + b"}]}]}"
    )


def _message(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": TEXT, **fields}


# Bodies at the edges of what each reading takes; ``taken`` is whether ``decode`` takes it
# (declined bodies are still read, by the models).
EDGES: list[tuple[type[BodyInput[Any]], Any, bytes, bool]] = [
    (PrepareInput, PrepareBody, _prepare(), True),
    (PrepareInput, PrepareBody, _prepare(conversation=[_message(origin={})]), True),
    (PrepareInput, PrepareBody, _prepare(conversation=[_message(origin=None)]), False),
    (
        PrepareInput,
        PrepareBody,
        _prepare(conversation=[_message(origin={"message_id": "m", "sequence": 3.0})]),
        False,  # 3.0 is an integer to the models; declined, they read it
    ),
    (
        PrepareInput,
        PrepareBody,
        _prepare(
            conversation=[
                _message(
                    origin={"type": "synthetic", "compaction_id": "c", "reason": "system_reminder"}
                )
            ]
        ),
        False,
    ),
    (PrepareInput, PrepareBody, _prepare(model_id="m"), False),  # both: refused by the rule
    (PrepareInput, PrepareBody, b'{"model_id": "m", "model_id": null, "model": {}}', False),
    (
        PrepareInput,
        PrepareBody,
        b'{"model_id": "m", "conversation": [{"content": [{"text": "b", "type": "text"}],'
        b' "role": "tool", "role": "user"}]}',
        True,  # keys in any order, the last of a repeated one
    ),
    (
        PrepareInput,
        PrepareBody,
        b'{"model_id": "m", "conversation": [{"role": "user", "content": [{"type": "thinking",'
        b' "text": "x", "type": "text"}]}]}',
        False,  # a repeated tag: the models read it
    ),
    (
        PrepareInput,
        PrepareBody,
        _prepare(conversation=[_message(content=[RESULT])]),
        False,  # the store's rule (invalid_block), raised by the models
    ),
    (
        PrepareInput,
        PrepareBody,
        b'{"model_id": "m", "conversation": [{"role": "user", "content": [{"type":'
        b' "provider_opaque", "driver": "d", "kind": "k", "payload": [NaN, 1e400]}]}]}',
        False,
    ),
    (
        PrepareInput,
        PrepareBody,
        b'{"model_id": "m", "conversation": [{"role": "user", "content": [{"type":'
        b' "provider_opaque", "driver": "d", "kind": "k", "payload": [1e-05, 123456789012345678'
        b'901234567890, "\\u00e9\\ud83d\\ude00"]}]}]}',
        True,
    ),
    (
        PrepareInput,
        PrepareBody,
        b'{"m\\u006fdel_id": "m", "conversation": [{"role": "user", "content": [{"t\\u0079pe":'
        b' "t\\u0065xt", "\\u0074ext": "a"}]}]}',
        True,  # keys and tags read after their escapes, as the models read them
    ),
    # A payload at the limits ``_payload`` looks for in one walk, and just past them.
    (PrepareInput, PrepareBody, _opaque(b"[" * 64 + b"]" * 64), True),
    (PrepareInput, PrepareBody, _opaque(b"[" * 65 + b"]" * 65), False),
    (PrepareInput, PrepareBody, _opaque(b'{"a": ' * 64 + b"1" + b"}" * 64), True),
    (PrepareInput, PrepareBody, _opaque(b'"' + b"a" * (MAX_JSON_CHARS - 2) + b'"'), True),
    (PrepareInput, PrepareBody, _opaque(b'"' + b"a" * (MAX_JSON_CHARS - 1) + b'"'), False),
    # More bytes than the limit: the full check (fewer characters of compact JSON: taken).
    (PrepareInput, PrepareBody, _opaque(b'"' + b"\\u00e9" * 200_000 + b'"'), True),
    (PrepareInput, PrepareBody, _opaque(b"[" + b"1,   " * 600_000 + b"1]"), False),
    (PrepareInput, PrepareBody, _opaque(b"[" + b"1,   " * 250_000 + b"1]"), True),
    (PrepareInput, PrepareBody, _opaque(b'{"x": [true, false, null, -0, 1.5]}'), True),
    (PrepareInput, PrepareBody, b'{"model_id": "m"} x', False),
    (PrepareInput, PrepareBody, b'{"model_id": "m", "conversation": [], "x": 1}', False),
    (PrepareInput, PrepareBody, b'{"model_id": "\\ud800"}', False),
    (PrepareInput, PrepareBody, b"\xef\xbb\xbf{}", False),
    (TokenCountInput, TokenCountBody, b'{"text": "abc"}', True),
    (TokenCountInput, TokenCountBody, b'{"text": "abc", "content": []}', False),
    (TokenCountInput, TokenCountBody, b'{"text": null, "content": []}', True),
    (TokenCountInput, TokenCountBody, b'{"content": null, "prepare": ' + _prepare() + b"}", True),
    (AppendInput, AppendBody, json.dumps({"messages": [_message()]}).encode(), True),
    (AppendInput, AppendBody, b'{"messages": []}', False),
    (AppendInput, AppendBody, json.dumps({"messages": [_message()] * 1001}).encode(), False),
    (
        AppendInput,
        AppendBody,
        json.dumps({"messages": [_message(origin={})]}).encode(),
        False,  # appends carry no origin
    ),
    (
        AppendInput,
        AppendBody,
        json.dumps(
            {
                "messages": [
                    {
                        "role": "tool",
                        "content": [
                            {
                                "type": "tool_result",
                                "id": "c",
                                "output": TEXT,
                                "artifacts": [{"kind": "file_change", "payload": {"path": 1}}],
                            }
                        ],
                    }
                ]
            }
        ).encode(),
        False,  # compaction could not decode the artifact: refused by the models
    ),
]


@pytest.mark.parametrize(("kind", "model", "raw", "taken"), EDGES, ids=range(len(EDGES)))
def test_the_edges_of_what_is_taken(
    kind: type[BodyInput[Any]], model: Any, raw: bytes, taken: bool
) -> None:
    assert (assert_same_reading(kind, model, raw) is not None) is taken


@pytest.mark.parametrize("n", [10, 1_000])
def test_the_benchmark_conversation_is_taken(n: int) -> None:
    # What the speed of the stateless prepare rests on: an agent's conversation is taken whole.
    body = prepare_body(
        system_context(),
        agent_conversation(n),
        tool_definitions(),
        pruning=PruningWatermark(through_sequence=n // 2),
    )
    raw = json.dumps(body, ensure_ascii=False).encode()
    taken = assert_same_reading(PrepareInput, PrepareBody, raw)
    assert taken is not None
    assert answer(taken) == answer(model_reading(PrepareInput, PrepareBody, raw))
