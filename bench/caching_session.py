"""The agent session of ``bench/caching.py``: its system prompt, tools and tool outputs, and the
driver that runs it through the service's HTTP API (turns, tool results, live updates).

Everything here is deterministic: the same arguments give the same session, byte for byte, so
two runs differ only in what the service does with it.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.caching_provider import TASK_MARK, TOOLS

__all__ = ["AGENT_TOOLS", "SYSTEM_PROMPT", "Driven", "drive_session", "tool_output"]

TURN_DEADLINE_SECONDS = 300.0

_RULES = [
    "Read the relevant files before you change anything; never guess at an API.",
    "Prefer the smallest change that makes the failing test pass, then run the whole module.",
    "Keep functions short; name things after what they mean in the domain.",
    "When a test fails, read its output to the end before you form a theory.",
    "Never delete a test to make a suite pass; fix the code or ask.",
    "Quote file paths exactly as the tools return them.",
    "Use grep to find every caller before you rename a function.",
    "Do not reformat code you did not otherwise change.",
    "Write a short plan first and keep it current as you learn more.",
    "Summarize what you changed and why when the task is done.",
]
SYSTEM_PROMPT = (
    "You are a senior software engineer working in a Python repository through tools. "
    "You can read and edit files, search the tree, list directories and run the tests.\n\n"
    + "\n".join(
        f"{i + 1}. {rule} " + "This matters because reviewers read every diff line by line. " * 3
        for i, rule in enumerate(_RULES * 2)
    )
    + "\n\nAnswer concisely. When the task is complete, reply without calling a tool."
)

_PATH = {"type": "string", "description": "A path relative to the repository root."}
AGENT_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file of the repository and return its lines.",
        "input_schema": {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
    },
    {
        "name": "grep",
        "description": "Search files under a path for a regular expression.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": _PATH},
            "required": ["pattern"],
        },
    },
    {
        "name": "run_tests",
        "description": "Run pytest on a selector and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"selector": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["selector"],
        },
    },
    {
        "name": "list_directory",
        "description": "List the entries of a directory.",
        "input_schema": {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
    },
    {
        "name": "edit_file",
        "description": "Replace an exact snippet of a file with another.",
        "input_schema": {
            "type": "object",
            "properties": {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    },
]
assert [t["name"] for t in AGENT_TOOLS] == list(TOOLS)

# Characters of each tool's output: run_tests is over the 8192-character pruning line.
OUTPUT_CHARS = {
    "read_file": 6000,
    "grep": 1800,
    "run_tests": 14000,
    "list_directory": 900,
    "edit_file": 300,
}


def tool_output(name: str, call_id: str) -> str:
    """A deterministic output of about ``OUTPUT_CHARS[name]`` characters for one call."""
    rng = random.Random(f"{name}:{call_id}")
    lines: list[str] = []
    size = 0
    while size < OUTPUT_CHARS[name]:
        n = rng.randrange(1000)
        line = {
            "read_file": f"    value_{n} = compute_{n % 37}(items[{n % 11}], limit={n})",
            "grep": f"src/pkg_{n % 17}/module_{n % 29}.py:{n}: def handler_{n % 13}(request):",
            "run_tests": f"tests/test_module_{n % 29}.py::test_case_{n} PASSED [{n % 100:3d}%]",
            "list_directory": f"module_{n}.py  {n * 37} bytes",
            "edit_file": f"replaced 1 occurrence at line {n}",
        }[name]
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


@dataclass
class Driven:
    """What the driver saw: turns, and the durable updates of the session, in order."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    prunings: int = 0  # times the pruning watermark moved, as seen after each round


async def _wait_turn(api: httpx.AsyncClient, sid: str, turn: dict[str, Any]) -> dict[str, Any]:
    """The turn once it waits for tool results or is terminal (``?wait=true`` is bounded)."""
    deadline = time.monotonic() + TURN_DEADLINE_SECONDS
    while turn["status"] == "running" and turn.get("phase") != "waiting_tool_results":
        if time.monotonic() > deadline:
            raise TimeoutError(f"turn {turn['turn_id']} still {turn.get('phase')}")
        response = await api.get(
            f"/v1/sessions/{sid}/turns/{turn['turn_id']}", params={"wait": "true"}
        )
        response.raise_for_status()
        turn = response.json()
    return turn


async def _updates_through(
    api: httpx.AsyncClient, sid: str, after: int, turn_id: str
) -> list[dict[str, Any]]:
    """The durable updates after ``after`` through the ``turn_finished`` of ``turn_id``."""
    found: list[dict[str, Any]] = []
    async with api.stream(
        "GET", f"/v1/sessions/{sid}/events", params={"after": after}, timeout=60.0
    ) as stream:
        async for line in stream.aiter_lines():
            if not line.startswith("data: "):
                continue
            update = json.loads(line[6:])
            if "sequence" not in update:
                continue  # a live delta: not durable
            found.append(update)
            if update["type"] == "turn_finished" and update["turn_id"] == turn_id:
                return found
    raise RuntimeError("the event stream ended before the turn finished")


async def _watermark(api: httpx.AsyncClient, sid: str) -> int | None:
    response = await api.get(f"/v1/sessions/{sid}")
    response.raise_for_status()
    watermark: int | None = response.json()["tool_result_pruned_through_sequence"]
    return watermark


async def drive_session(
    api: httpx.AsyncClient, sid: str, provider_calls: Any, total_calls: int
) -> Driven:
    """Run tasks until the provider has served ``total_calls`` model calls; answer every tool
    call with its ``tool_output``. ``provider_calls()`` is how many calls it served so far."""
    driven = Driven()
    sequence = 0
    task = 0
    last_watermark = None
    while provider_calls() < total_calls:
        task += 1
        body = {
            "client_request_id": uuid.uuid4().hex,
            "input": [{"type": "text", "text": f"{TASK_MARK}{task}] Fix the failing handler."}],
        }
        response = await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
        response.raise_for_status()
        turn = await _wait_turn(api, sid, response.json())
        while turn["status"] == "running":
            results = [
                {
                    "tool_call_id": call["tool_call_id"],
                    "state": "success",
                    "output": [
                        {"type": "text", "text": tool_output(call["name"], call["tool_call_id"])}
                    ],
                }
                for call in turn["pending_tool_calls"]
            ]
            response = await api.post(
                f"/v1/sessions/{sid}/turns/{turn['turn_id']}/tool-results",
                params={"wait": "true"},
                json={"results": results},
            )
            response.raise_for_status()
            turn = await _wait_turn(api, sid, response.json())
            watermark = await _watermark(api, sid)
            driven.prunings += watermark != last_watermark
            last_watermark = watermark
        if turn["status"] != "completed":
            raise RuntimeError(f"turn {turn['turn_id']} ended {turn['status']}: {turn}")
        driven.turns.append(turn)
        updates = await _updates_through(api, sid, sequence, turn["turn_id"])
        driven.updates += updates
        sequence = updates[-1]["sequence"]
    return driven
