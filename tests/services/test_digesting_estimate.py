"""The stateless prepare measures and digests each message's JSON in one go
(``DigestingEstimate``): its answer must be the answer the plain estimate gives, byte for byte,
``request_digest`` included, whatever the content (floats in a payload, artifacts, a rewritten
result, every role)."""

from __future__ import annotations

from typing import Any

import pytest

from app import fastjson
from app.api.render.prepare import stateless_json
from app.core.caching import prefix_record
from app.core.capabilities import ModelCapabilities
from app.core.content import Item, RealOrigin, text_block
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from app.services import prepare as stateless
from app.services.request_prefix import DigestingEstimate, prefixed
from tests.core.factories import assistant, call, part, tool, tool_def, user

CAPS = ModelCapabilities(200_000, 8_000)
SYSTEM = [part("core/agent-system", "You are careful.")]
TOOLS = [tool_def("read")]


def conversation() -> list[Item]:
    opaque: Any = {"type": "provider_opaque", "driver": "d", "kind": "k", "payload": {"x": 1e-7}}
    artifact: Any = {"kind": "file_change", "payload": {"path": "a.py", "score": 0.5}}
    return [
        user("hello"),
        assistant("reading", call("c1")),
        tool("c1", "x" * 9_000, seq=3),  # pruned below: a rewritten result
        Item("assistant", "normal", [text_block("thinking aloud"), opaque], RealOrigin()),
        user("again", mid="m-5"),
        assistant("", call("c2")),
        tool("c2", "done", artifacts=[artifact]),
        user("ünïcode ✓"),
    ]


def answer(counter: Any) -> bytes:
    result = stateless.run_prepare(
        SYSTEM, conversation(), TOOLS, CAPS, PruningWatermark(through_sequence=4), counter
    )
    return fastjson.dumps(stateless_json(result, encode_as=None))


def test_the_stateless_answer_is_the_plain_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    digesting = answer(fastjson.ESTIMATE)  # the service swaps in a ``DigestingEstimate``
    monkeypatch.setattr(stateless, "DigestingEstimate", fastjson.FastEstimateCounter)
    assert digesting == answer(fastjson.ESTIMATE)


def test_the_units_it_digests_are_the_records_own() -> None:
    items = conversation()
    counter = DigestingEstimate()
    prepared = prepare(SYSTEM, items, TOOLS, CAPS, PruningWatermark(through_sequence=4), counter)
    # Taken: every message whose blocks as sent are strings by their schema (artifacts are
    # removed before sending), not the one with a free-form payload.
    assert len(counter.units) == len(items) - 1
    plain = prefix_record.record_request(
        prepared, items, identify_stored=False, dumps=fastjson.content_bytes
    )
    recorded = prefixed(prepared, items, None, identify_stored=False).prefix_record
    assert recorded == plain.to_bytes()


@pytest.mark.parametrize(
    "tools",
    [
        [],
        TOOLS,
        [tool_def("read"), {"name": "w", "description": "d", "input_schema": {"maximum": 1e-7}}],
    ],
)
def test_the_tool_list_it_measured_is_the_records_own(tools: list[Any]) -> None:
    items = conversation()
    counter = DigestingEstimate()
    prepared = prepare(SYSTEM, items, tools, CAPS, PruningWatermark(), counter)
    plain = prefix_record.record_request(
        prepared, items, identify_stored=False, dumps=fastjson.content_bytes
    )
    assert prefixed(prepared, items, None, identify_stored=False).prefix_record == plain.to_bytes()
    if tools:  # the very bytes the record's encoder hands back for the request's tool list
        assert counter.dumps(prepared.request["tools"]) == fastjson.spec_bytes(tools)
        assert counter.dumps(prepared.request["tools"]) is counter.dumps(prepared.request["tools"])
