"""``json_value_problem``'s depth walk (``app/core/limits/json_values.py``) tells scalars apart
by their exact type first: it must find what the walk before it found, on any value."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.limits.json_values import MAX_JSON_DEPTH, _depth_problem


def _reference(value: Any) -> str | None:
    # The walk before: ``isinstance`` against ``dict | list`` for every child.
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return "too deep"
        pending.extend((child, depth) for child in children if isinstance(child, dict | list))
    return None


class _Sub(list[Any]):
    """A list subclass: still nesting."""


def _nested(depth: int, kind: str) -> Any:
    value: Any = 1
    for level in range(depth):
        value = {"k": value} if kind == "dict" else [value] if level % 2 else _Sub([value])
    return value


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=2), children, max_size=3)
        | st.lists(children, max_size=2).map(_Sub)
        | st.dictionaries(st.text(max_size=2), children, max_size=2).map(OrderedDict)
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_the_depth_walk_agrees_with_the_reference(value: Any) -> None:
    assert (_depth_problem(value) is None) == (_reference(value) is None)


def test_the_depth_walk_at_the_limit() -> None:
    for kind in ("dict", "list"):
        for depth in (MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 3 * MAX_JSON_DEPTH):
            value = _nested(depth, kind)
            assert (_depth_problem(value) is None) == (_reference(value) is None)
            assert (_depth_problem(value) is None) == (depth <= MAX_JSON_DEPTH)
