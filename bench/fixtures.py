"""Realistic agent conversations for benchmarks (reusable by every benchmark).

``agent_conversation(n)`` builds ``n`` stored messages of a coding agent's session: user requests,
assistant text with tool calls, and tool results carrying logs, source code and JSON in a mix of
sizes — a few over the prune line (8192 characters) and the projection line (32 000 bytes). It is
deterministic for a given seed. ``prepare_body`` turns the same inputs into the JSON body of
``POST /v1/prepare``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.core.capabilities import ModelCapabilities
from app.core.content import (
    Block,
    CachedMeasure,
    Item,
    RealOrigin,
    SyntheticOrigin,
    ToolResultBlock,
    text_block,
)
from app.core.counting import ESTIMATE, TokenCounter
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart, ToolDefinition

__all__ = [
    "BENCH_CAPABILITIES",
    "agent_conversation",
    "item_to_json",
    "prepare_body",
    "system_context",
    "tool_definitions",
    "with_cached_measures",
]

BENCH_CAPABILITIES = ModelCapabilities(context_window_tokens=200_000, max_output_tokens=32_000)
_NO_PRUNING = PruningWatermark()

_LOG_LINE = (
    "2025-06-01T12:{m:02d}:{s:02d}Z INFO  worker-{w} processed batch {b} in {ms} ms "
    "(queue depth {q}, retries 0)\n"
)
_CODE = '''def normalize_path(path: str, root: str) -> str:
    """Resolve ``path`` against ``root`` and refuse anything that escapes it."""
    candidate = os.path.realpath(os.path.join(root, path))
    if not candidate.startswith(root + os.sep):
        raise ValueError(f"{path} escapes the workspace root {root}")
    return candidate


class Cache:
    def __init__(self, capacity: int = 128) -> None:
        self._entries: dict[str, bytes] = {}
        self._capacity = capacity

'''
_PROSE = (
    "I looked at the failing test. The fixture builds the session before the migration runs, so "
    "the table is missing; moving the fixture after `upgrade head` fixes it. Next I will run the "
    "whole suite and check the type errors that the refactor introduced. "
)
_REQUESTS = [
    "Fix the failing test in tests/storage/test_sessions.py and explain the cause.",
    "Add pagination to GET /v1/sessions; keep the response shape stable.",
    "Why does the budget say 12k tokens when the provider reports 14k? Investigate.",
    "Refactor the prune stage so it never copies unchanged items. Ünïcödé paths must still work: "
    "docs/設計.md",
]
_TOOLS = ["read", "bash", "grep", "edit"]


def _log(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        line = _LOG_LINE.format(
            m=rng.randrange(60),
            s=rng.randrange(60),
            w=rng.randrange(16),
            b=rng.randrange(10_000),
            ms=rng.randrange(900),
            q=rng.randrange(50),
        )
        lines.append(line)
        size += len(line)
    return "".join(lines)[:chars]


def _code(chars: int) -> str:
    return (_CODE * (chars // len(_CODE) + 1))[:chars]


def _json(rng: random.Random, chars: int) -> str:
    rows = []
    size = 2
    while size < chars:
        row = {"id": rng.randrange(10**6), "path": f"src/mod_{rng.randrange(500)}.py", "ok": True}
        rows.append(row)
        size += 60
    return json.dumps(rows)


def _output_size(rng: random.Random, index: int) -> int:
    # A fixed schedule for the outliers keeps the mix the same at every conversation length, so
    # growth between sizes measures the pipeline, not the luck of the draw.
    if index % 53 == 52:
        return rng.randrange(34_000, 60_000)  # over the projection budget
    if index % 13 == 12:
        return rng.randrange(8_500, 20_000)  # over the prune line
    if rng.random() < 0.35:
        return rng.randrange(1_500, 6_000)
    return rng.randrange(80, 1_500)


def _tool_output(rng: random.Random, tool: str, index: int) -> str:
    size = _output_size(rng, index)
    if tool == "bash":
        return _log(rng, size)
    if tool == "read":
        return _code(size)
    if tool == "grep":
        return _json(rng, size)
    return f"Edited src/app.py: {rng.randrange(1, 40)} lines changed."


def agent_conversation(n_messages: int, seed: int = 7) -> list[Item]:
    """``n_messages`` stored messages (sequence 1..n) of a plausible agent session."""
    rng = random.Random(seed)
    items: list[Item] = []
    seq = 0

    def add(role: Any, content: list[Block]) -> None:
        nonlocal seq
        seq += 1
        items.append(Item(role, "normal", content, RealOrigin(f"msg-{seq:06d}", seq)))

    while len(items) < n_messages:
        add("user", [text_block(rng.choice(_REQUESTS))])
        for _ in range(rng.randrange(1, 5)):  # model calls of the turn
            if len(items) >= n_messages:
                break
            calls: list[Block] = []
            for _ in range(rng.randrange(1, 4)):
                tool = rng.choice(_TOOLS)
                arguments = json.dumps({"path": f"src/mod_{rng.randrange(500)}.py", "limit": 200})
                calls.append(
                    {
                        "type": "tool_call",
                        "id": f"call_{seq}_{len(calls)}",
                        "name": tool,
                        "input": arguments,
                    }
                )
            add("assistant", [text_block(_PROSE[: rng.randrange(40, len(_PROSE))]), *calls])
            for call in calls:
                if len(items) >= n_messages:
                    break
                assert call["type"] == "tool_call"
                result: ToolResultBlock = {
                    "type": "tool_result",
                    "id": call["id"],
                    "name": call["name"],
                    "output": [text_block(_tool_output(rng, call["name"], seq))],
                    "state": "success",
                }
                if call["name"] == "edit":
                    result["artifacts"] = [
                        {"kind": "file_change", "payload": {"path": "src/app.py"}}
                    ]
                add("tool", [result])
        if len(items) < n_messages:
            add("assistant", [text_block("Done: " + _PROSE)])
    return items[:n_messages]


def with_cached_measures(items: Sequence[Item], counter: TokenCounter = ESTIMATE) -> list[Item]:
    """The items as storage would load them: each with its measure computed at append time."""
    return [
        replace(
            item,
            cached=CachedMeasure(counter.name, counter.measure_message(item.role, item.content)),
        )
        for item in items
    ]


def system_context() -> list[SystemPart]:
    prompt = (
        "You are a careful coding agent. Read before you edit, run the tests after each change, "
        "and report what you verified. " * 40
    )
    return [SystemPart("core/agent-system", [text_block(prompt)])]


def tool_definitions() -> list[ToolDefinition]:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
        "required": ["path"],
    }
    return [
        {"name": name, "description": f"The {name} tool of the workspace.", "input_schema": schema}
        for name in _TOOLS
    ]


def item_to_json(item: Item) -> dict[str, Any]:
    """A conversation message in the API's JSON shape."""
    origin = item.origin
    if isinstance(origin, SyntheticOrigin):
        origin_json: dict[str, Any] = {
            "type": "synthetic",
            "compaction_id": origin.compaction_id,
            "reason": origin.reason,
            "source_message_id": origin.source_message_id,
            "source_sequence": origin.source_sequence,
        }
    else:
        origin_json = {"type": "real", "message_id": origin.message_id, "sequence": origin.sequence}
    return {"role": item.role, "kind": item.kind, "content": item.content, "origin": origin_json}


def prepare_body(
    system: Sequence[SystemPart],
    items: Sequence[Item],
    tools: Sequence[ToolDefinition],
    capabilities: ModelCapabilities = BENCH_CAPABILITIES,
    pruning: PruningWatermark = _NO_PRUNING,
) -> dict[str, Any]:
    """The ``POST /v1/prepare`` body carrying the same inputs."""
    return {
        "system_context": [{"key": p.key, "content": p.content} for p in system],
        "conversation": [item_to_json(i) for i in items],
        "tools": list(tools),
        "model": {
            "context_window_tokens": capabilities.context_window_tokens,
            "max_output_tokens": capabilities.max_output_tokens,
            "max_reasoning_tokens": capabilities.max_reasoning_tokens,
            "accepts_data_blocks": capabilities.accepts_data_blocks,
            "fixed_reserve_tokens": capabilities.fixed_reserve_tokens,
            "safety_margin_tokens": capabilities.safety_margin_tokens,
            "token_counter": capabilities.token_counter,
        },
        "tool_result_pruning": {
            "through_sequence": pruning.through_sequence,
            "spill_directory": pruning.spill_directory,
        },
        "encode": None,
    }
