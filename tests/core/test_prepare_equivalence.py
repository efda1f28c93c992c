"""``prepare`` gives what its stages give when run one after another (spec §2, §3.1).

``prepare`` walks the Conversation once, takes usual segments a short way and carries on from an
earlier call's walk (``app/core/pipeline/one_pass/segments.py``, ``resume.py``). The reference
below is the stages'
own public functions composed as the pipeline lists them; both must agree on the request bytes,
the budget, the report, the provenance, which items are the caller's own objects, the errors
(code, detail, order), the messages the counter is asked to measure, and leave the input as is.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.capabilities import ModelCapabilities
from app.core.content import (
    Block,
    CachedMeasure,
    Item,
    Kind,
    Origin,
    OutputBlock,
    RealOrigin,
    SyntheticOrigin,
    compact_json,
    text_block,
)
from app.core.counting import ESTIMATE, CounterWrapper, TokenCounter
from app.core.errors import InvalidInput
from app.core.pipeline.assemble import (
    assemble_request,
    validate_conversation,
    validate_system_context,
)
from app.core.pipeline.budget import measure_budget
from app.core.pipeline.normalize import normalize
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import (
    PreparedModelCall,
    ProjectionReport,
    PruningWatermark,
    SystemPart,
    ToolDefinition,
)
from app.core.pipeline.project import project_tool_results
from app.core.pipeline.prune import prune_tool_results
from tests.core.factories import call, data_block, part, result_block, tool_def

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_prepare(
    system_context: Sequence[SystemPart],
    conversation: Sequence[Item],
    tools: Sequence[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark,
    counter: TokenCounter,
) -> PreparedModelCall:
    """The stages one after another, each over the whole conversation."""
    limits = capabilities.limits()
    pruned = prune_tool_results(conversation, pruning)
    projected = project_tool_results(pruned.items)
    normalized = normalize(projected.items, accepts_data_blocks=capabilities.accepts_data_blocks)
    validate_system_context(system_context, counter)
    validate_conversation(conversation)
    budget, measures = measure_budget(
        system_context, normalized.items, tools, limits, counter, original_items=conversation
    )
    request = assemble_request(
        system_context, normalized.items, tools, capabilities.max_output_tokens
    )
    report = ProjectionReport(
        pruned_tool_results=pruned.pruned_tool_results,
        truncated_tool_results=projected.truncated_tool_results,
        original_tokens=projected.original_tokens,
        projected_tokens=projected.projected_tokens,
        synthesized_tool_results=normalized.synthesized_tool_results,
        dropped_orphan_results=normalized.dropped_orphan_results,
        filtered_data_blocks=normalized.filtered_data_blocks,
    )
    return PreparedModelCall(request, budget, report, normalized.items, measures, counter)


class FramingCounter:
    """An exact-style counter: bytes as tokens, 3 per message and 3 per request."""

    name = "framing"
    request_overhead_tokens = 3

    def measure_content(self, content: Sequence[Block]) -> int:
        return ESTIMATE.measure_content(content)

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self.frame_message(role, self.measure_content(content))

    def frame_message(self, role: str, content_measure: int) -> int:
        return content_measure + 3

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return ESTIMATE.measure_tools(tools)

    def tokens(self, total_measure: int) -> int:
        return total_measure


class Recording(CounterWrapper):
    """Remembers every message it is asked to measure, as sent."""

    def __init__(self, inner: TokenCounter) -> None:
        super().__init__(inner)
        self.measured: list[str] = []

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        self.measured.append(compact_json([role, content]))
        return self._inner.measure_message(role, content)


Prepare = Callable[..., PreparedModelCall]


class Extending:
    """``prepare`` on its own previous result, as a session's context calls it (a call that
    raised leaves the previous one in place)."""

    def __init__(self) -> None:
        self.last: PreparedModelCall | None = None

    def __call__(self, *args: Any) -> PreparedModelCall:
        self.last = prepare(*args, extends=self.last)
        return self.last


def outcome(
    fn: Prepare,
    conversation: Sequence[Item],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark,
    inner: TokenCounter,
) -> tuple[Any, ...]:
    """Everything observable of one call, in comparable form."""
    system = [part("core/agent-system", "agent ü"), part("rules", "be brief")]
    tools = [tool_def("read"), tool_def("bash")]
    counter = Recording(inner)
    before = copy.deepcopy((system, list(conversation), tools))
    try:
        prepared = fn(system, conversation, tools, capabilities, pruning, counter)
    except InvalidInput as error:
        result: tuple[Any, ...] = ("error", error.code, error.detail, error.extra)
    else:
        own = {id(item): index for index, item in enumerate(conversation)}
        result = (
            compact_json(prepared.request),
            asdict(prepared.budget),
            asdict(prepared.projection),
            prepared.provenance,
            # The caller's own object (by position), or an equal copy.
            [(own.get(id(item)), item) for item in prepared.items],
        )
    assert (system, list(conversation), tools) == before, "the input was changed"
    return (*result, counter.measured)


# ----- varied conversations -------------------------------------------------------------------

OUTPUTS: list[list[str | OutputBlock]] = [
    ["ok"],
    ["ünï 界 😀"],
    [""],
    ["z" * 7_999],  # just under the usual line
    ["z" * 8_000],  # on it: not usual, yet never changed
    ["w" * 8_193],  # over the prune line
    ["x" * 9_000],
    ["y" * 33_000],  # over the projection budget
    ["é" * 17_000],  # 34 000 bytes in 17 000 characters
    ["a" * 5_000, "b" * 5_000],  # two blocks, joined over the prune line
    ["look", data_block()],
    [data_block(name=None)],
    ["q" * 40_000, data_block("https://example.com/" + "p" * 300)],
    # Salient lines in the part pruning (first) or projection (second) cuts (spec §9).
    ["log line\n" * 600 + "error: in the middle\n" + "log line\n" * 600],
    ["ok line\n" * 2_500 + "FAILED test_x\nKilled\n" + "ok line\n" * 2_500],
]
# Mostly short results, as in a real session; the others test every line.
OUTPUT = st.one_of(st.sampled_from(OUTPUTS[:2]), st.sampled_from(OUTPUTS))
# How a call's result turns up: mostly in order, else every way normalize has to repair.
RESULT = st.sampled_from(
    ["in_order"] * 8 + ["missing", "unknown", "swapped", "twice", "renamed", "two_blocks"]
)


class History:
    """Builds items with increasing sequences, as a session stores them."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.items: list[Item] = []

    def add(self, role: Any, content: list[Block], kind: Kind = "normal") -> None:
        seq = len(self.items) + 1
        origin: Origin = RealOrigin(f"m{seq}", seq)
        shape = self.draw(st.integers(0, 12))
        if shape == 0:
            origin = RealOrigin()  # live: no row yet
        elif shape == 1:
            origin = SyntheticOrigin("k1", "last_user_request_replay", f"m{seq}", seq)
        item = Item(role, kind, content, origin)
        cached = self.draw(st.integers(0, 5))
        if cached <= 2:
            measure = ESTIMATE.measure_message(role, content)
            item = replace(item, cached=CachedMeasure("estimate", measure))
        elif cached == 3:
            item = replace(item, cached=CachedMeasure("estimate", 12_345))  # wrong: shows reuse
        elif cached == 4:
            item = replace(item, cached=CachedMeasure("framing", 77))
        self.items.append(item)

    def result(self, call_id: str, name: str) -> list[Block]:
        artifacts = [{"kind": "file_change", "payload": {"path": call_id}}]
        with_artifacts = self.draw(st.integers(0, 3)) == 0
        output = self.draw(OUTPUT)
        return [
            result_block(
                call_id, *output, name=name, artifacts=artifacts if with_artifacts else None
            )
        ]


@st.composite
def conversations(draw: st.DrawFn) -> list[Item]:
    history = History(draw)
    for turn in range(draw(st.integers(0, 8))):
        step = draw(st.sampled_from(["assistant"] * 4 + ["user", "user", "orphan", "system"]))
        if step == "system" and draw(st.integers(0, 5)):
            step = "user"  # a system message is rare
        if step in ("user", "system"):
            content: list[Block] = [text_block(f"request {turn}")]
            if draw(st.integers(0, 5)) == 0:
                content.append(data_block())
            kind: Kind = "world_state" if draw(st.integers(0, 5)) == 0 else "normal"
            history.add(step if step == "user" else cast(Any, "system"), content, kind)
        elif step == "orphan":
            history.add("tool", history.result(f"orphan{turn}", "read"))
        else:
            ids = [f"c{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
            if len(ids) > 1 and draw(st.integers(0, 5)) == 0:
                ids[-1] = ids[0]  # a repeated call id
            calls = [(i, draw(st.sampled_from(["read", "bash"]))) for i in ids]
            content = [text_block(f"thinking {turn}")] if draw(st.booleans()) else []
            if draw(st.integers(0, 8)) == 0:
                content.append(data_block())
            content += [call(i, n) for i, n in calls]
            if draw(st.integers(0, 15)) == 0:
                content.append(result_block("stray", "in an assistant message", artifacts=[]))
            history.add("assistant", content)
            answers: list[list[Block]] = []
            for call_id, name in calls:
                how = draw(RESULT)
                if how == "missing":
                    continue
                if how == "unknown":
                    call_id = f"unknown{turn}"
                if how == "renamed":
                    name = "renamed"
                answer = history.result(call_id, name)
                if how == "two_blocks":
                    answer.append(
                        draw(st.sampled_from([text_block("stray"), *history.result("x", "y")]))
                    )
                answers.append(answer)
                if how == "twice":
                    answers.append(history.result(call_id, name))
                if how == "swapped" and len(answers) > 1:
                    answers[-1], answers[-2] = answers[-2], answers[-1]
            if draw(st.integers(0, 8)) == 0:
                answers.append(history.result(f"late{turn}", "read"))  # after the run is complete
            if draw(st.integers(0, 10)) == 0:
                answers.append([])  # an empty tool message
            for answer in answers:
                history.add("tool", answer)
    return history.items


WATERMARKS = st.sampled_from(
    [PruningWatermark(), PruningWatermark(3), PruningWatermark(12, "/spill"), PruningWatermark(99)]
)
CAPABILITIES = st.sampled_from(
    [
        ModelCapabilities(1_000_000, 4_000),
        ModelCapabilities(1_000_000, 4_000, accepts_data_blocks=False),
    ]
)
COUNTERS = st.sampled_from([ESTIMATE, FramingCounter()])


@FAST
@given(conversations(), CAPABILITIES, WATERMARKS, COUNTERS)
def test_prepare_equals_the_stages_run_one_after_another(
    items: list[Item], caps: ModelCapabilities, pruning: PruningWatermark, counter: TokenCounter
) -> None:
    session = Extending()
    # A growing conversation, as a turn prepares it (later calls carry on from earlier ones) ...
    for length in range(len(items) + 1):
        prefix = items[:length]
        assert outcome(session, prefix, caps, pruning, counter) == outcome(
            reference_prepare, prefix, caps, pruning, counter
        )
    # ... the same once more, and from nothing earlier.
    expected = outcome(reference_prepare, items, caps, pruning, counter)
    assert outcome(session, items, caps, pruning, counter) == expected
    assert outcome(prepare, items, caps, pruning, counter) == expected


@FAST
@given(conversations(), conversations(), CAPABILITIES, WATERMARKS)
def test_a_remembered_walk_serves_only_the_very_same_objects(
    items: list[Item], other: list[Item], caps: ModelCapabilities, pruning: PruningWatermark
) -> None:
    heads = [index for index, item in enumerate(items) if item.role != "tool"]
    last = heads[-1] if heads else 0  # where the remembered walk of ``items`` ends
    orphan = Item("tool", "normal", [result_block("late", "ok")], RealOrigin("t", 99))
    # A result stored later for the last call of the segment that ends where the walk ends.
    calls = [b for i in items[:last] if i.role == "assistant" for b in i.content]
    answer = orphan
    if calls and calls[-1]["type"] == "tool_call":
        late = result_block(calls[-1]["id"], "late", name=calls[-1]["name"])
        answer = Item("tool", "normal", [late], RealOrigin("t", 99))
    half = len(items) // 2
    cases = [
        (copy.deepcopy(items), caps, pruning),  # equal copies, as a reload gives
        ([*items[:half], *copy.deepcopy(items[half:])], caps, pruning),
        (items, caps, PruningWatermark(1)),
        (items, replace(caps, accepts_data_blocks=not caps.accepts_data_blocks), pruning),
        ([*items[:1], *other], caps, pruning),
        ([*items[:half], *other], caps, pruning),
        ([*items[:last], orphan, *items[last:]], caps, pruning),  # no longer a segment's end
        ([*items[:last], orphan], caps, pruning),
        ([*items[:last], answer, *items[last:]], caps, pruning),
    ]
    for conversation, c, p in cases:
        session = Extending()
        outcome(session, items, caps, pruning, ESTIMATE)  # its walk carried on next
        assert outcome(session, conversation, c, p, ESTIMATE) == outcome(
            reference_prepare, conversation, c, p, ESTIMATE
        )


@FAST
@given(conversations(), WATERMARKS)
def test_no_stage_attaches_a_cache_to_an_item_it_builds(
    items: list[Item], pruning: PruningWatermark
) -> None:
    # What lets the single pass reuse every cache it meets without the budget's id set.
    pruned = prune_tool_results(items, pruning).items
    projected = project_tool_results(pruned).items
    for accepts in (True, False):
        try:
            normalized = normalize(projected, accepts_data_blocks=accepts).items
        except InvalidInput:
            continue
        assert all(any(i is x for x in items) for i in normalized if i.cached is not None)


def test_a_result_stored_after_the_remembered_walk_joins_its_segment() -> None:
    user_1 = Item("user", "normal", [text_block("go")], RealOrigin("m1", 1))
    asked = Item("assistant", "normal", [call("c1")], RealOrigin("m2", 2))
    user_2 = Item("user", "normal", [text_block("and?")], RealOrigin("m3", 3))
    answer = Item("tool", "normal", [result_block("c1", "done")], RealOrigin("m4", 4))
    caps = ModelCapabilities(10_000, 400)
    first = prepare([], [user_1, asked, user_2], [], caps)  # its walk covers [user_1, asked]
    assert first.projection.synthesized_tool_results == 1
    later = [user_1, asked, answer, user_2]  # e.g. a history edited by hand
    on_first = functools.partial(prepare, extends=first)
    assert outcome(on_first, later, caps, PruningWatermark(), ESTIMATE) == outcome(
        reference_prepare, later, caps, PruningWatermark(), ESTIMATE
    )
    assert prepare([], later, [], caps, extends=first).projection.synthesized_tool_results == 0


def test_a_walk_is_carried_only_by_a_result_that_remembers_it() -> None:
    caps = ModelCapabilities(10_000, 400)
    items = [
        Item("user", "normal", [text_block(f"u{k}")], RealOrigin(f"m{k}", k + 1)) for k in range(3)
    ]
    remembered = prepare([], items, [], caps)
    assert remembered.walk is not None
    assert remembered.walk.source == tuple(items[:2])  # the segments before the last
    stateless = prepare([], items, [], caps, remember=False)
    assert stateless.walk is None
    assert stateless == remembered  # the walk is not part of the call's value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@FAST
@given(JSON)
def test_compact_json_is_the_json_dumps_the_estimate_was_defined_with(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
