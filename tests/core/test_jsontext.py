"""JSON at any depth: the same text and values as ``json``, also past its recursion limit."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import jsontext
from app.core.jsontext import MAX_ARGUMENT_DEPTH, dumps, loads, loads_arguments

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=30,
)


def compact(value: Any, **options: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), **options)


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def same(a: Any, b: Any) -> bool:
    # NaN != NaN: compare the JSON text of both instead.
    return compact(a) == compact(b)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_the_loop_writes_and_reads_exactly_what_json_does(value: Any) -> None:
    text = compact(value)
    assert jsontext._encode(value, sort_keys=False) == text
    assert jsontext._encode(value, sort_keys=True) == compact(value, sort_keys=True)
    decoded = jsontext._Decoder(text, max_depth=None, finite_only=False).value()
    assert same(decoded, json.loads(text))
    assert dumps(value) == text
    assert same(loads(text), json.loads(text))


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_values_deeper_than_the_stack_go_both_ways(depth: int) -> None:
    deep = nested(depth)
    with pytest.raises(RecursionError):
        json.dumps(deep)
    text = dumps(deep)
    opens = ['{"k":' if level % 2 == 0 else "[" for level in range(depth)]
    closes = ["}" if level % 2 == 0 else "]" for level in range(depth)]
    assert text == "".join(reversed(opens)) + '"x"' + "".join(closes)
    back = loads(text)
    assert dumps(back) == text
    assert dumps(loads(text.encode())) == text  # bytes, as PostgreSQL's driver hands them over


def test_keys_and_numbers_are_written_as_json_writes_them() -> None:
    value = {1: [1.5, math.inf, -math.inf, 10**40], False: None, None: True, 2.5: "é\n\u2028"}
    assert jsontext._encode(value, sort_keys=False) == compact(value)
    nan = jsontext._encode([math.nan], sort_keys=False)
    assert nan == compact([math.nan]) == "[NaN]"
    with pytest.raises(TypeError):
        jsontext._encode({(1,): 1}, sort_keys=False)
    with pytest.raises(TypeError):
        jsontext._encode([object()], sort_keys=False)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsontext._encode(loop, sort_keys=False)


@pytest.mark.parametrize(
    "text", ['{"a" 1}', "[1,]", "[1 2]", '{"a":1,}', "[", '"unterminated', "tru", "[] []", "{1:2}"]
)
def test_broken_text_is_refused_as_json_refuses_it(text: str) -> None:
    deep = "[" * 2_000 + text + "]" * 2_000
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads(deep)


def test_arguments_nest_at_most_the_documented_depth() -> None:
    at_cap = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    over = "[" * (MAX_ARGUMENT_DEPTH + 1) + "]" * (MAX_ARGUMENT_DEPTH + 1)
    assert loads_arguments(at_cap) == json.loads(at_cap)
    with pytest.raises(ValueError, match="deeper than 128"):
        loads_arguments(over)
    with pytest.raises(ValueError, match="deeper than 128"):
        loads_arguments("[" * 1_000_000)  # refused before anything that deep is built
    # Brackets inside strings do not count as nesting.
    brackets = json.dumps({"pattern": "[" * 500})
    assert loads_arguments(brackets) == {"pattern": "[" * 500}


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]", '{"a": 1e999}'])
def test_arguments_are_strict_json(text: str) -> None:
    for padded in (text, "[" * 100 + "{}," * 100 + text + "]" * 100):
        with pytest.raises(ValueError, match=r"not valid JSON|out of range"):
            loads_arguments(padded)
    assert loads_arguments('{"big": 1e308, "int": 123456789012345678901234567890}') == {
        "big": 1e308,
        "int": 123456789012345678901234567890,
    }
