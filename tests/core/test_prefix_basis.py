"""A record built on an earlier record's basis (``record_extending``, what a turn does
from one model call to the next) is byte for byte the record built from scratch, whatever
happened between the two requests, and digests only what is new."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.caching import prefix_record as prefix
from app.core.content import Item, RealOrigin, compact_json, text_block
from app.core.counting import ESTIMATE
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from tests.core.factories import assistant, call, tool, tool_def, user
from tests.core.test_prefix import BIG, CAPS, SYSTEM, TOOLS, compacted


def exchange(i: int, *, big: bool = False, stored: bool = True) -> list[Item]:
    """A user request, a call and its result: stored rows, or a stateless caller's items."""

    def row(letter: str, offset: int) -> dict[str, Any]:
        return {"mid": f"{letter}{i}", "seq": 3 * i + offset} if stored else {}

    return [
        user(f"request {i}", **row("u", 1)),
        assistant("", call(f"c{i}"), **row("a", 2)),
        tool(f"c{i}", f"result {i} " + BIG * big, **row("t", 3)),
    ]


NO_PRUNING = PruningWatermark()


def both(
    conversation: list[Item],
    basis: prefix.RecordBasis | None,
    *,
    pruning: PruningWatermark = NO_PRUNING,
    identify_stored: bool = True,
    rewind: str | None = None,
    tools: Any = TOOLS,
    previous: Any = None,
) -> tuple[bytes, bytes, prefix.RecordBasis]:
    """The record from scratch, the record on ``basis``, and the latter's basis (``previous``:
    the request the basis records, which ``prepare`` builds on, as a turn's next call does)."""
    prepared = prepare(SYSTEM, conversation, tools, CAPS, pruning, ESTIMATE, extends=previous)
    options: dict[str, Any] = {"identify_stored": identify_stored, "rewind_compaction_id": rewind}
    fresh = prefix.record_request(prepared, conversation, **options)
    extended, built = prefix.record_extending(prepared, conversation, basis, **options)
    return fresh.to_bytes(), extended.to_bytes(), built


# What may happen between two model calls of a turn (or two turns of a session).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.booleans(), st.booleans()),
        st.tuples(st.just("prune"), st.integers(0, 40)),
        st.tuples(st.just("compact"), st.integers(0, 4)),
        st.tuples(st.just("rewind"), st.booleans()),
        st.tuples(st.just("stateless"), st.booleans()),
        st.tuples(st.just("tools"), st.booleans()),
        st.tuples(st.just("copy")),  # the same items again, as new objects (a fresh read)
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(STEPS, st.booleans())
def test_a_record_on_a_basis_is_the_record_from_scratch(
    steps: list[tuple[Any, ...]], built_on_previous: bool
) -> None:
    """From scratch, on a basis, and on a basis of the request ``prepare`` built on (the items
    it shares with that request are then not compared again): the very same record."""
    conversation = exchange(0)
    options: dict[str, Any] = {}
    basis: prefix.RecordBasis | None = None
    made = 1
    for step in steps:
        match step:
            case ("append", count, big, stored):
                for _ in range(count):
                    conversation = [*conversation, *exchange(made, big=big, stored=stored)]
                    made += 1
            case ("prune", through):
                options["pruning"] = PruningWatermark(through_sequence=through)
            case ("compact", keep):
                conversation = compacted(f"cp-{made}", f"summary {made}", conversation[-keep:])
                made += 1
            case ("rewind", on):
                options["rewind"] = "cp-1" if on else None
            case ("stateless", on):
                options["identify_stored"] = not on
            case ("tools", on):
                options["tools"] = [*TOOLS, tool_def("glob")] if on else TOOLS
            case ("copy",):
                conversation = [
                    Item(i.role, i.kind, list(i.content), i.origin) for i in conversation
                ]
        previous = None
        if built_on_previous and basis is not None:
            previous = prepare(
                SYSTEM,
                list(basis.conversation),
                options.get("tools", TOOLS),
                CAPS,
                options.get("pruning", NO_PRUNING),
                ESTIMATE,
            )
            _, basis = prefix.record_extending(
                previous,
                basis.conversation,
                None,
                identify_stored=options.get("identify_stored", True),
                rewind_compaction_id=options.get("rewind"),
            )
        fresh, extended, basis = both(conversation, basis, previous=previous, **options)
        assert extended == fresh


def test_only_what_is_new_is_digested() -> None:
    """A stateless record digests every message from its JSON: counting the messages serialized
    tells how many units were computed rather than taken from the basis."""
    serialized: list[Any] = []

    def dumps(value: Any) -> bytes:
        serialized.append(value)
        return compact_json(value).encode()

    conversation = [item for i in range(5) for item in exchange(i)]
    heads = 1 + len(SYSTEM)  # the tool surface and each system part, digested every time
    prepared = prepare(SYSTEM, conversation, TOOLS, CAPS)
    _, basis = prefix.record_extending(
        prepared, conversation, None, identify_stored=False, dumps=dumps
    )
    assert len(serialized) == heads + 15
    longer = [*conversation, *exchange(5)]
    prepared = prepare(SYSTEM, longer, TOOLS, CAPS)
    serialized.clear()
    record, _ = prefix.record_extending(prepared, longer, basis, identify_stored=False, dumps=dumps)
    assert len(serialized) == heads + 3
    fresh = prefix.record_request(prepared, longer, identify_stored=False, dumps=dumps)
    assert record == fresh
    # Under other options nothing is taken from it.
    serialized.clear()
    prefix.record_extending(prepared, longer, basis, identify_stored=True, dumps=dumps)
    assert len(serialized) == heads  # stored rows are their sequences: nothing to serialize
    serialized.clear()
    options: dict[str, Any] = {"dumps": dumps, "rewind_compaction_id": "x"}
    prefix.record_extending(prepared, longer, basis, identify_stored=False, **options)
    assert len(serialized) == heads + 18


def test_a_unit_is_taken_only_for_the_same_item_carrying_the_same_content() -> None:
    conversation = [item for i in range(3) for item in exchange(i)]
    _, _, basis = both(conversation, None)
    # The same content objects in items of other rows: the units are their sequences.
    moved = [
        Item(i.role, i.kind, i.content, RealOrigin(None, 100 + n))
        for n, i in enumerate(conversation)
    ]
    fresh, extended, _ = both(moved, basis)
    assert extended == fresh
    assert fresh != both(conversation, None)[0]
    # The same items, one message sent with other content (what a stage could rewrite).
    prepared = prepare(SYSTEM, conversation, TOOLS, CAPS)
    messages = prepared.request["messages"]
    messages[4] = {**messages[4], "content": [text_block("rewritten")]}
    options: dict[str, Any] = {"identify_stored": False}
    _, stateless = prefix.record_extending(prepared, conversation, None, **options)
    messages[5] = {**messages[5], "content": [text_block("rewritten too")]}
    fresh_record = prefix.record_request(prepared, conversation, **options)
    extended_record, _ = prefix.record_extending(prepared, conversation, stateless, **options)
    assert extended_record == fresh_record
    # The same content in another item (a stage's copy: not the caller's own row).
    prepared = prepare(SYSTEM, conversation, TOOLS, CAPS)
    _, stored = prefix.record_extending(prepared, conversation, None, identify_stored=True)
    copy = prepared.items[3]
    prepared.items[3] = Item(copy.role, copy.kind, copy.content, RealOrigin(None, None))
    fresh_record = prefix.record_request(prepared, conversation, identify_stored=True)
    extended_record, _ = prefix.record_extending(
        prepared, conversation, stored, identify_stored=True
    )
    assert extended_record == fresh_record
    assert fresh_record.kinds[1 + len(SYSTEM) + 3] == prefix.REWRITTEN  # tools, system, items
