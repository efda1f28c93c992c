"""The shortcuts of the prepare body's own reading (``app/api/inputs/content.py``) give what the
ways they stand for give: items and origins built through their slots are the constructors'
values, and a payload the one walk passes is one ``json_value_problem`` passes."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import from_json

from app.api.inputs import content as wire
from app.core.content import Item, RealOrigin, text_block
from app.core.limits.json_values import MAX_JSON_CHARS, json_value_problem


def test_items_and_origins_are_built_through_their_slots() -> None:
    # The shortcut is taken (the classes are still exactly the fields it sets).
    assert wire.new_item is not Item
    assert wire.new_origin is not RealOrigin


def test_a_built_item_is_the_constructors() -> None:
    content = [text_block("hello")]
    for origin in (RealOrigin(), RealOrigin("m-1", 3), RealOrigin(None, 7)):
        built_origin = wire.new_origin(origin.message_id, origin.sequence)
        assert type(built_origin) is RealOrigin
        assert built_origin == origin
        assert hash(built_origin) == hash(origin)
        for role, kind in (("user", "normal"), ("tool", "world_state"), ("system", "normal")):
            built = wire.new_item(role, kind, content, built_origin)
            made = Item(role, kind, content, origin)  # type: ignore[arg-type]
            assert type(built) is Item
            assert built == made
            assert repr(built) == repr(made)
            for field in fields(Item):
                assert getattr(built, field.name) == getattr(made, field.name)
            assert built.content is content


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(JSON, st.booleans(), st.sampled_from([None, 0, 2]))
def test_what_the_walk_passes_json_value_problem_passes(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    parsed = from_json(raw)
    if len(raw) <= MAX_JSON_CHARS and wire._shallow_and_exact(parsed):
        assert json_value_problem(parsed) is None


def test_the_walk_leaves_floats_depth_and_size_to_the_full_check() -> None:
    assert wire._shallow_and_exact({"path": "a.py", "n": [1, True, None, "x"]})
    assert not wire._shallow_and_exact({"score": 0.5})
    assert not wire._shallow_and_exact(from_json(b"[NaN]"))
    assert wire._shallow_and_exact(from_json(b"[" * 64 + b"]" * 64))
    assert not wire._shallow_and_exact(from_json(b"[" * 65 + b"]" * 65))
