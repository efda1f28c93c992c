"""``POST /v1/prepare`` with a spill directory: the endpoint stores nothing,
so it writes no file either; its answer gives each full text and the exact path the marker
names, for the caller to write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_prepare_api import body, prepare, text, user

pytestmark = pytest.mark.anyio

FULL = "build step ok\n" * 1200 + "error: the middle one\n" + "build step ok\n" * 100


def call(call_id: str, seq: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": call_id, "name": "bash", "input": "{}"}],
        "origin": {"type": "real", "message_id": f"m{seq}", "sequence": seq},
    }


def result(call_id: str, output: str, seq: int) -> dict[str, Any]:
    block = {
        "type": "tool_result",
        "id": call_id,
        "name": "bash",
        "output": text(output),
        "state": "error",
    }
    return {
        "role": "tool",
        "content": [block],
        "origin": {"type": "real", "message_id": f"m{seq}", "sequence": seq},
    }


def payload(conversation: list[dict[str, Any]], directory: str | None) -> dict[str, Any]:
    return body(
        conversation=conversation,
        model={"context_window_tokens": 200_000, "max_output_tokens": 32_000},
        tool_result_pruning={"through_sequence": 10, "spill_directory": directory},
    )


async def test_the_answer_gives_each_full_text_and_the_path_its_marker_names(
    stateless_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    directory = str(tmp_path / "spill")
    conversation = [
        user("run it", 1),
        call("call/1", 2),
        result("call/1", FULL, 3),
        call("c2", 4),
        result("c2", "short", 5),
    ]
    response = await prepare(stateless_client, payload(conversation, directory))
    assert response.status_code == 200, response.text
    answer = response.json()
    path = f"{directory}/call_1.c5fb05e4d7a4906f.txt"
    assert answer["spills"] == [{"tool_call_id": "call/1", "path": path, "text": FULL}]
    sent = answer["request"]["messages"][4]["content"][0]["output"][0]["text"]
    assert f"Full result at {path} — read it if you still need it]" in sent
    assert "error: the middle one" in sent  # the salient line is in the request too
    assert not (tmp_path / "spill").exists()  # nothing written: the caller writes it


async def test_without_a_spill_directory_or_anything_pruned_there_is_nothing_to_write(
    stateless_client: httpx.AsyncClient,
) -> None:
    conversation = [user("run it", 1), call("c1", 2), result("c1", FULL, 3)]
    plain = (await prepare(stateless_client, payload(conversation, None))).json()
    assert plain["spills"] == []
    assert plain["projection"]["pruned_tool_results"] == 1
    short = [user("run it", 1), call("c1", 2), result("c1", "x" * 8192, 3)]
    assert (await prepare(stateless_client, payload(short, "/spill"))).json()["spills"] == []


async def test_a_pruned_result_the_request_drops_needs_no_file(
    stateless_client: httpx.AsyncClient,
) -> None:
    conversation = [
        user("run it", 1),
        result("orphan", FULL, 2),  # no call before it: dropped by normalize
        call("c1", 3),
        result("c1", "kept short", 4),
        result("c1", FULL, 5),  # a duplicate result: only the first is sent
    ]
    answer = (await prepare(stateless_client, payload(conversation, "/spill"))).json()
    assert answer["spills"] == []
    assert answer["projection"]["dropped_orphan_results"] == 2
