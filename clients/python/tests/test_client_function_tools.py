"""Tools as typed Python functions (``@function_tool``): the schema from the signature and the
docstring, registered once with the session, run by ``run_turn`` against the real service and
a loopback provider; typed content blocks; the error rule."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from ctxsvc_client import (
    AsyncClient,
    Client,
    FunctionTool,
    TextContent,
    ToolCallBlock,
    ToolResultBlock,
    function_tool,
)
from tests.providers.fake_wire import FakeToolCall, openai_stream
from tests.providers.fakes import FakeProviderServer, StreamReply
from tests.servers import ServerProcess


class Window(BaseModel):
    start: str
    end: str


@function_tool
def forecast(city: str, unit: Literal["C", "F"] = "C", window: Window | None = None) -> str:
    """The forecast for a city.

    Args:
        city: The city's name, e.g. Oslo.
        unit: Degrees Celsius or Fahrenheit.
        window: The hours to cover (all day when left out).
    """
    return f"{city}: 14 {unit}, rain after {window.start if window else 'noon'}"


@function_tool
async def station(city: str) -> dict[str, Any]:
    """The weather station that reports for a city."""
    return {"city": city, "station": f"{city[:3].upper()}-1"}


@function_tool
def broken(city: str) -> str:
    """A tool whose backend is down."""
    raise ConnectionError(f"no route to the {city} backend")


@function_tool(on_error="raise")
def strict(city: str) -> str:
    """A tool whose failure the caller wants to see itself."""
    raise RuntimeError(f"strict failure for {city}")


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    spec = forecast.spec()
    assert spec["name"] == "forecast"
    assert spec["description"] == "The forecast for a city."
    schema = spec["input_schema"]
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["city"] == {
        "description": "The city's name, e.g. Oslo.",
        "title": "City",
        "type": "string",
    }
    assert schema["properties"]["unit"]["enum"] == ["C", "F"]
    assert schema["properties"]["unit"]["default"] == "C"
    assert schema["$defs"]["Window"]["required"] == ["start", "end"]
    assert isinstance(station, FunctionTool)
    assert station.spec()["input_schema"]["required"] == ["city"]
    # Checked against the signature: a nested model is built, a wrong type is refused.
    arguments = forecast.keyword_arguments({"city": "Oslo", "window": {"start": "9", "end": "12"}})
    assert arguments["window"] == Window(start="9", end="12")
    with pytest.raises(ValueError, match="unit: Input should be 'C' or 'F'"):
        forecast.keyword_arguments({"city": "Oslo", "unit": "K"})
    with pytest.raises(TypeError, match="cannot be filled from JSON"):
        function_tool(lambda *cities: cities)


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as fake:
        yield fake


def chat_model(client: Client, provider: FakeProviderServer) -> str:
    model_id = f"chat-{uuid.uuid4().hex[:8]}"
    client.put_model(
        model_id,
        context_window_tokens=100_000,
        max_output_tokens=1000,
        provider={
            "kind": "openai_chat",
            "base_url": provider.base_url + "/v1",
            "model_name": "gpt-fake",
        },
    )
    return model_id


def calls(*pairs: tuple[str, dict[str, Any]]) -> StreamReply:
    return StreamReply(
        openai_stream(
            tool_calls=[
                FakeToolCall(f"call_{i}", name, [json.dumps(arguments)])
                for i, (name, arguments) in enumerate(pairs)
            ],
            finish_reason="tool_calls",
        )
    )


def test_function_tools_are_registered_once_and_run_by_run_turn(
    server: ServerProcess, provider: FakeProviderServer
) -> None:
    provider.enqueue(
        calls(
            ("forecast", {"city": "Oslo", "unit": "C"}),
            # The model's mistake: the service checks the call against the schema it was sent.
            ("forecast", {"city": "Oslo", "unit": "K"}),
            ("broken", {"city": "Oslo"}),
        ),
        StreamReply(openai_stream(text=["Rain in Oslo after noon."])),
    )
    with Client(server.url, timeout=30) as client:
        session = client.create_session(
            model_id=chat_model(client, provider),
            agent={"system_prompt": "You answer weather questions.", "tools": [forecast, broken]},
        )
        # Not given again: the client runs the functions it registered with the session.
        turn = client.run_turn(session.id, "Will it rain in Oslo?")
        messages = client.list_messages(session.id, limit=50).messages

    assert (turn.status, turn.final_text) == ("completed", "Rain in Oslo after noon.")
    # What the model was shown is the function's schema (and nothing of a coding agent).
    sent = provider.requests[0].json()
    assert [t["function"] for t in sent["tools"]] == [
        {"name": t.name, "description": t.description, "parameters": t.input_schema}
        for t in (forecast, broken)
    ]
    # Typed blocks: the calls, then each result by the documented error rule.
    (call_message,) = [m for m in messages if m.role == "assistant" and m.blocks[0].type != "text"]
    assert all(isinstance(b, ToolCallBlock) for b in call_message.blocks)
    results = [b for m in messages if m.role == "tool" for b in m.blocks]
    assert all(isinstance(r, ToolResultBlock) for r in results)
    assert [(r.name, r.state) for r in results] == [  # type: ignore[union-attr]
        ("forecast", "success"),
        ("forecast", "error"),
        ("broken", "error"),
    ]
    texts = [r.text for r in results]  # type: ignore[union-attr]
    assert texts[0] == "Oslo: 14 C, rain after noon"
    assert "'K' is not one of ['C', 'F']" in texts[1]
    assert texts[2] == "ConnectionError: no route to the Oslo backend"
    (answer,) = messages[-1].blocks
    assert answer == TextContent(text="Rain in Oslo after noon.")


@pytest.mark.anyio
async def test_an_async_function_tool_runs_and_on_error_raise_propagates(
    server: ServerProcess, provider: FakeProviderServer
) -> None:
    provider.enqueue(
        calls(("station", {"city": "Oslo"})),
        StreamReply(openai_stream(text=["OSL-1 reports."])),
        calls(("strict", {"city": "Lima"})),
    )
    with Client(server.url, timeout=30) as blocking:
        model_id = chat_model(blocking, provider)
    async with AsyncClient(server.url, timeout=30) as client:
        session = await client.create_session(
            model_id=model_id,
            agent={"system_prompt": "You answer weather questions.", "tools": [station, strict]},
        )
        turn = await client.run_turn(session.id, "Which station reports for Oslo?")
        assert turn.final_text == "OSL-1 reports."
        tool_message = [m for m in (await client.list_messages(session.id)).messages][-2]
        (result,) = tool_message.blocks
        assert isinstance(result, ToolResultBlock)
        assert json.loads(result.text) == {"city": "Oslo", "station": "OSL-1"}

        # ``on_error="raise"``: the exception leaves run_turn; the turn waits for that result.
        with pytest.raises(RuntimeError, match="strict failure for Lima"):
            await client.run_turn(session.id, "And Lima, strictly?")
        (waiting,) = (await client.list_turns(session.id, limit=1)).turns
        assert waiting.waiting_for_tools
