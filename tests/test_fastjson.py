"""orjson's bytes are the bytes spec §3.1 measures (``app.fastjson``), property by property.

The reference is ``app.core.content.compact_json`` (the standard encoder: compact, non-ASCII as
itself). Every estimate, stored figure and provider body made with orjson must be byte-equal to
it, so a budget never depends on which encoder made it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import fastjson
from app.core.content import Block, compact_json
from app.core.counting import ESTIMATE as REFERENCE_ESTIMATE

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any Unicode text a request can carry: every code point but lone surrogates (refused at the
# door), control characters, quotes and backslashes included.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-05, 1.25e-07, 1e16, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1e-4]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # past 64 bits orjson refuses: the reference takes over
    | FLOATS
    | TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=25,
)

_SOURCES = st.one_of(
    st.builds(
        lambda u, m: {"source_type": "url", "url": u, "media_type": m}, TEXT, st.none() | TEXT
    ),
    st.builds(
        lambda d, m: {"source_type": "base64", "data": d, "media_type": m},
        TEXT,
        st.none() | TEXT,
    ),
    st.builds(lambda i: {"source_type": "file_id", "id": i}, TEXT),
)
DATA = st.builds(lambda s, n: {"type": "data", "source": s, "name": n}, _SOURCES, st.none() | TEXT)
TEXT_BLOCK = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
BLOCKS: st.SearchStrategy[Block] = st.one_of(
    TEXT_BLOCK,
    st.builds(lambda t: {"type": "thinking", "thinking": t}, TEXT),
    DATA,
    st.builds(
        lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "input": a},
        TEXT,
        TEXT,
        TEXT | JSON_VALUES.map(json.dumps),
    ),
    st.builds(
        lambda i, n, o, s, a: {
            "type": "tool_result",
            "id": i,
            "name": n,
            "output": o,
            "state": s,
            **({"artifacts": a} if a is not None else {}),
        },
        TEXT,
        TEXT,
        st.lists(TEXT_BLOCK | DATA, max_size=3),
        st.sampled_from(["success", "error", "interrupted", "denied"]),
        st.none() | st.lists(st.builds(lambda k, p: {"kind": k, "payload": p}, TEXT, JSON_VALUES)),
    ),
    st.builds(
        lambda d, k, p: {"type": "provider_opaque", "driver": d, "kind": k, "payload": p},
        TEXT,
        TEXT,
        JSON_VALUES,
    ),
)
CONTENT = st.lists(BLOCKS, max_size=5)


def _reference_bytes(value: Any) -> bytes | None:
    try:
        return compact_json(value).encode("utf-8")
    except (ValueError, TypeError):
        return None


@FAST
@given(JSON_VALUES)
def test_spec_bytes_are_the_reference_bytes_of_any_json_value(value: Any) -> None:
    assert fastjson.spec_bytes(value) == compact_json(value).encode("utf-8")


@FAST
@given(CONTENT)
def test_the_estimate_measures_content_exactly_as_the_core_does(content: list[Block]) -> None:
    assert fastjson.ESTIMATE.measure_content(content) == REFERENCE_ESTIMATE.measure_content(content)
    assert fastjson.ESTIMATE.measure_message("tool", content) == (
        REFERENCE_ESTIMATE.measure_message("tool", content)
    )


@FAST
@given(CONTENT)
def test_content_bytes_are_the_reference_bytes(content: list[Block]) -> None:
    # What the prefix record digests (request content, a tool list): spec_bytes, faster.
    reference = _reference_bytes(content)
    if reference is not None:
        assert fastjson.content_bytes(content) == reference


@FAST
@given(
    st.lists(
        st.builds(
            lambda n, s: {"name": n, "description": n, "input_schema": s},
            TEXT,
            st.dictionaries(TEXT, JSON_VALUES, max_size=3),
        ),
        max_size=3,
    )
)
def test_the_estimate_measures_tools_exactly_as_the_core_does(tools: list[Any]) -> None:
    assert fastjson.ESTIMATE.measure_tools(tools) == REFERENCE_ESTIMATE.measure_tools(tools)


@FAST
@given(CONTENT)
def test_content_without_floats_is_orjson_bytes_unchanged(content: list[Block]) -> None:
    # The fast path: strings-only blocks are orjson's bytes, no fallback involved.
    if not fastjson.has_float(content):
        reference = _reference_bytes(content)
        if reference is not None:
            assert fastjson.dumps(content) == reference


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@FAST
def _any_float(value: Any) -> bool:
    """The plain recursive reading of ``has_float``."""
    if isinstance(value, float):
        return True
    if type(value) is dict:
        return any(_any_float(v) for v in value.values())
    if type(value) is list or type(value) is tuple:
        return any(_any_float(v) for v in value)
    return False


class _Float(float):
    pass


@given(JSON_VALUES)
def test_has_float_finds_what_a_plain_walk_finds(value: Any) -> None:
    assert fastjson.has_float(value) == _any_float(value)
    wrapped = {"a": [value, (1, "x", None, True)]}
    assert fastjson.has_float(wrapped) == _any_float(wrapped)


def test_has_float_finds_float_subclasses_and_tuples() -> None:
    assert fastjson.has_float([_Float(1)])
    assert fastjson.has_float({"a": _Float(2)})
    assert fastjson.has_float(_Float(3))
    assert fastjson.has_float({"k": (1.5,)})
    assert not fastjson.has_float([True, 1, "s", None, {"x": {"y": [{"z": []}]}}])


@given(JSON_VALUES)
def test_dumps_reads_back_as_the_same_value(value: Any) -> None:
    decoded = fastjson.loads(fastjson.dumps(value))
    if any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(value)):
        return  # orjson writes NaN and infinities as null (the reference writes non-JSON)
    assert _same(decoded, value)


@FAST
@given(JSON_VALUES)
def test_loads_reads_what_the_reference_reads(value: Any) -> None:
    text = compact_json(value)
    assert _same(fastjson.loads(text), json.loads(text))
    assert _same(fastjson.loads(text.encode()), json.loads(text))


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_deep_nesting_falls_back_to_the_reference_both_ways() -> None:
    deep: Any = "x"
    for _ in range(400):  # past orjson's 254 levels, within the standard codec's stack
        deep = [deep]
    text = compact_json(deep)
    assert fastjson.dumps(deep) == text.encode()
    assert fastjson.spec_bytes(deep) == text.encode()
    assert fastjson.loads(text) == deep


def test_values_json_refuses_are_refused() -> None:
    import datetime

    for value in ({1: "a"} | {"b": datetime.date(2026, 1, 1)}, [object()]):
        try:
            fastjson.dumps(value)
        except (TypeError, ValueError):
            continue
        raise AssertionError(f"{value!r} was encoded")
