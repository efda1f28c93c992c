"""``run_turn`` and ``byo_compact`` against the real service, blocking and asyncio."""

from __future__ import annotations

from typing import Any

import pytest

from client_support import VALID_SUMMARY, scripted, tool_call
from ctxsvc_client import AsyncClient, Client, SummaryRequest, ToolResult
from tests.servers import ServerProcess

TOOLS = [{"name": name} for name in ("count", "explode", "deny", "stats", "wait")]
AGENT = {"system_prompt": "You are an agent.", "tools": TOOLS}


def tool_messages(client: Client, session_id: str) -> list[dict[str, Any]]:
    """The stored tool results, in order (``content[0]`` of each tool message)."""
    messages = client.list_messages(session_id, limit=500).messages
    return [m.content[0] for m in messages if m.role == "tool"]


def output_text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["output"])


@pytest.fixture
def client(server: ServerProcess) -> Client:
    with Client(server.url, timeout=30) as client:
        yield client  # type: ignore[misc]


def test_run_turn_runs_each_tool_and_a_raising_tool_is_an_error_the_model_sees(
    client: Client, server: ServerProcess
) -> None:
    model_id = scripted(
        server,
        [
            {
                "tool_calls": [
                    tool_call("count", path="a.py", lines=3),
                    tool_call("explode", reason="disk full"),
                    tool_call("wait"),  # the agent's, but no function given for it
                ]
            },
            {"tool_calls": [tool_call("deny"), tool_call("stats")]},
            {"text": "Done: 3 lines."},
        ],
    )
    session = client.create_session(model_id=model_id, agent=AGENT)
    seen: list[tuple[str, dict[str, Any]]] = []

    def count(path: str, lines: int) -> str:
        seen.append(("count", {"path": path, "lines": lines}))
        return f"{path}: {lines} lines"

    def explode(reason: str) -> str:
        raise OSError(reason)

    def deny() -> ToolResult:
        return ToolResult("not allowed here", state="denied", artifacts=[{"kind": "note"}])

    turn = client.run_turn(
        session.id,
        [{"type": "text", "text": "Count the lines."}],
        tools={"count": count, "explode": explode, "deny": deny, "stats": lambda: {"n": 3}},
    )
    assert (turn.status, turn.final_text) == ("completed", "Done: 3 lines.")
    assert seen == [("count", {"path": "a.py", "lines": 3})]
    results = tool_messages(client, session.id)
    assert [(r["name"], r["state"]) for r in results] == [
        ("count", "success"),
        ("explode", "error"),
        ("wait", "error"),
        ("deny", "denied"),
        ("stats", "success"),
    ]
    assert output_text(results[0]) == "a.py: 3 lines"
    assert output_text(results[1]) == "OSError: disk full"
    assert output_text(results[2]) == "no tool named 'wait' is available to this caller"
    assert results[3]["artifacts"] == [{"kind": "note", "payload": None}]
    assert output_text(results[4]) == '{"n": 3}'


def test_run_turn_returns_a_failed_turn_instead_of_raising(
    client: Client, server: ServerProcess
) -> None:
    model_id = scripted(server, [{"error": "server_error"}])
    session = client.create_session(model_id=model_id, agent=AGENT)
    turn = client.run_turn(session.id, "Go.")
    assert turn.status == "failed"
    assert (turn.outcome or {})["code"] == "model_error"


def test_the_blocking_client_refuses_an_async_tool_as_an_error_result(
    client: Client, server: ServerProcess
) -> None:
    model_id = scripted(server, [{"tool_calls": [tool_call("wait")]}, {"text": "ok"}])
    session = client.create_session(model_id=model_id, agent=AGENT)

    async def wait() -> str:
        return "never"

    turn = client.run_turn(session.id, "Go.", tools={"wait": wait})
    assert turn.status == "completed"
    (result,) = tool_messages(client, session.id)
    assert result["state"] == "error"
    assert "use AsyncClient" in output_text(result)


@pytest.mark.anyio
async def test_the_async_run_turn_awaits_async_tools_and_calls_plain_ones(
    server: ServerProcess,
) -> None:
    model_id = scripted(
        server,
        [
            {"tool_calls": [tool_call("wait", seconds=0), tool_call("count", path="b")]},
            {"text": "ok"},
        ],
    )
    order: list[str] = []

    async def wait(seconds: int) -> str:
        order.append("wait")
        return f"waited {seconds}"

    def count(path: str) -> str:
        order.append("count")
        return path

    async with AsyncClient(server.url, timeout=30) as client:
        session = await client.create_session(model_id=model_id, agent=AGENT)
        turn = await client.run_turn(session.id, "Go.", tools={"wait": wait, "count": count})
        messages = (await client.list_messages(session.id)).messages
    assert (turn.status, turn.final_text) == ("completed", "ok")
    assert order == ["wait", "count"]  # one at a time, in the provider's order
    outputs = [m.content[0]["output"][0]["text"] for m in messages if m.role == "tool"]
    assert outputs == ["waited 0", "b"]


def test_byo_compact_installs_the_callers_summary(client: Client) -> None:
    session = client.create_session(model_id="local", agent=AGENT)
    client.run_turn(session.id, "Summarize ticket ABC-123.")
    asked: list[SummaryRequest] = []

    def summarize(request: SummaryRequest) -> str:
        asked.append(request)
        return VALID_SUMMARY

    checkpoint = client.byo_compact(
        session.id, summarize, encode="openai_chat", model="mine", allow_larger=True
    )
    (request,) = asked
    assert request.provider_payload is not None
    last = request.provider_payload["messages"][-1]
    assert "Create a durable continuation summary" in str(last["content"])
    assert (checkpoint.kind, checkpoint.model, checkpoint.summary) == (
        "manual",
        "mine",
        VALID_SUMMARY,
    )
    assert checkpoint.through_message_sequence == request.through_message_sequence
    context = client.get_context(session.id)
    assert [p.reason for p in context.provenance] == [
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
    ]


def test_byo_compact_keeps_what_was_appended_while_the_model_worked(client: Client) -> None:
    session = client.create_session(model_id="local", agent=AGENT)
    client.run_turn(session.id, "Summarize ticket ABC-123.")

    covered: list[int] = []

    def summarize(request: SummaryRequest) -> str:
        covered.append(request.through_message_sequence)
        # Meanwhile the conversation goes on.
        later = {"role": "assistant", "content": [{"type": "text", "text": "Later."}]}
        (appended,) = client.append_messages(session.id, [later])
        assert appended.sequence == request.through_message_sequence + 1
        return VALID_SUMMARY

    checkpoint = client.byo_compact(session.id, summarize, allow_larger=True)
    context = client.get_context(session.id)
    assert checkpoint.replaced_through_message_sequence == covered[0]
    assert [p.reason for p in context.provenance[:3]] == [
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
    ]
    assert context.conversation[-1].content[0]["text"] == "Later."


@pytest.mark.anyio
async def test_the_async_byo_compact_awaits_the_summarizer(server: ServerProcess) -> None:
    async def summarize(request: SummaryRequest) -> str:
        assert request.summary_model_id == "local"
        return VALID_SUMMARY

    async with AsyncClient(server.url, timeout=30) as client:
        session = await client.create_session(model_id="local", agent=AGENT)
        await client.run_turn(session.id, "Hello.")
        checkpoint = await client.byo_compact(session.id, summarize, allow_larger=True)
    assert checkpoint.model == "local"  # the summary model the request named
    assert checkpoint.summary == VALID_SUMMARY
