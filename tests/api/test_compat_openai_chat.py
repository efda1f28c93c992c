"""The OpenAI Chat Completions drop-in endpoint (spec §21) driven by the real ``openai`` SDK:
a real ``uvicorn`` process in front of the loopback fake provider, which reports cached tokens
as OpenAI's automatic prompt cache does (``tests.providers.fake_chat_cache``).

The client keeps its whole history and resends it each call, as the SDK's users do; the service
finds the session it continues, stores only what is new, and forks an edited history.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.providers.fake_chat_cache import ScriptedChat
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream
from tests.servers import ServerProcess, one_server

pytestmark = pytest.mark.slow

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"
# The service's own key: the SDK's api_key (Bearer for openai, x-api-key for anthropic).
SERVICE_KEY = "sk-ctxsvc-test"
AUTH = {"Authorization": f"Bearer {SERVICE_KEY}"}
# Over the fake cache's 1024-token minimum (⌈bytes ÷ 4⌉ per message): later calls read it.
SYSTEM = "You answer questions about the repository. " * 120


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeProviderServer, ScriptedChat]]:
    script = ScriptedChat()
    with FakeProviderServer(responder=script) as server:
        yield server, script


@pytest.fixture(scope="module")
def server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("compat")
    shutil.copyfile(sqlite_template, tmp / "ctxsvc.db")
    with one_server(
        f"sqlite+aiosqlite:///{tmp / 'ctxsvc.db'}",
        tmp,
        proxy_summary_model="local",
        api_keys=json.dumps([SERVICE_KEY]),
        proxy_caller_keys="true",
        log_level="DEBUG",
        **{KEY_ENV.removeprefix("CTXSVC_").lower(): "sk-test"},
    ) as process:
        yield process


def register(server: ServerProcess, fake: FakeProviderServer, **capabilities: Any) -> str:
    model_id = f"fake-chat-{uuid.uuid4().hex[:8]}"
    body: dict[str, Any] = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {
            "kind": "openai_chat",
            "base_url": fake.base_url + "/v1",
            "model_name": "gpt-fake",
            "api_key_env": KEY_ENV,
        },
        **capabilities,
    }
    response = httpx.put(f"{server.url}/v1/models/{model_id}", json=body, headers=AUTH, timeout=30)
    assert response.status_code == 201, response.text
    return model_id


def sdk(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key=SERVICE_KEY, max_retries=0, timeout=60
    )


def stored(server: ServerProcess, session_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{server.url}/v1/sessions/{session_id}/messages", headers=AUTH, timeout=30
    )
    assert response.status_code == 200, response.text
    return [m for m in response.json()["messages"] if m["kind"] == "normal"]


def session(server: ServerProcess, session_id: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/v1/sessions/{session_id}", headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_conversation_continues_one_session_streamed_or_not(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    history: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What does a.py do?"},
    ]
    script.answers.append("It prints hello.")
    raw = client.chat.completions.with_raw_response.create(model=model, messages=history)
    first = raw.parse()
    assert first.choices[0].message.content == "It prints hello."
    assert first.choices[0].finish_reason == "stop"
    sid = raw.headers["x-ctxsvc-session-id"]
    assert raw.headers["x-ctxsvc-compacted"] == "false"
    assert "x-ctxsvc-forked-from" not in raw.headers
    assert int(raw.headers["x-ctxsvc-input-tokens"]) > 1000
    assert first.usage is not None
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # nothing cached yet

    # The second call streams, resending the whole history plus the new question.
    history += [
        {"role": "assistant", "content": "It prints hello."},
        {"role": "user", "content": "And b.py?"},
    ]
    script.answers.append("It prints bye.")
    with client.chat.completions.with_streaming_response.create(
        model=model, messages=history, stream=True, stream_options={"include_usage": True}
    ) as streamed:
        assert streamed.headers["x-ctxsvc-session-id"] == sid
        chunks = list(streamed.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "It prints bye."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    # The system prompt and the first exchange were sent as before: the provider read them
    # from its cache.
    assert (usage.prompt_tokens_details.cached_tokens or 0) >= 1024

    assert [(m["role"], m["content"][0].get("text")) for m in stored(server, sid)] == [
        ("user", "What does a.py do?"),
        ("assistant", "It prints hello."),
        ("user", "And b.py?"),
        ("assistant", "It prints bye."),
    ]
    assert session(server, sid)["origin"] == "proxy:openai_chat"
    # The provider got the service's prepared request: the history once, no duplicate.
    sent = [m["role"] for m in script.bodies[-1]["messages"]]
    assert sent == ["system", "user", "assistant", "user"]


def test_tools_over_rounds_then_an_edited_history_forks(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    tools: list[Any] = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    history: list[Any] = [{"role": "user", "content": "Summarize a.py and b.py"}]
    script.answers.extend(
        [
            [("call_1", "read", '{"path": "a.py"}')],
            [("call_2", "read", '{"path":"b.py"}')],
            "a.py prints hello, b.py prints bye.",
        ]
    )
    files = {"a.py": "print('hello')", "b.py": "print('bye')"}
    sessions = set()
    # The SDK user's own loop: run each tool call, send its result back.
    for _ in range(3):
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=history, tools=tools
        )
        sessions.add(raw.headers["x-ctxsvc-session-id"])
        message = raw.parse().choices[0].message
        history.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            assert call.type == "function"
            path = json.loads(call.function.arguments)["path"]
            history.append({"role": "tool", "tool_call_id": call.id, "content": files[path]})
    assert history[-1]["content"] == "a.py prints hello, b.py prints bye."
    (sid,) = sessions
    rows = stored(server, sid)
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["role"] for m in rows] == roles
    assert rows[2]["content"][0]["output"] == [{"type": "text", "text": "print('hello')"}]
    assert rows[3]["content"][0]["input"] == '{"path":"b.py"}'

    # The client edits its first tool result and asks again: a new session, the stored one
    # untouched.
    edited = [*history[:2], {**history[2], "content": "print('HELLO')"}, *history[3:5]]
    script.answers.append("a.py shouts.")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=edited, tools=tools
    )
    fork = raw.headers["x-ctxsvc-session-id"]
    assert fork != sid
    assert raw.headers["x-ctxsvc-forked-from"] == sid
    assert session(server, fork)["forked_from"] == sid
    assert len(stored(server, fork)) == 6
    assert len(stored(server, sid)) == 6  # the original history is as it was

    # A retry of an earlier request forks as well (its answer is already stored).
    script.answers.append("Retried.")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=history[:3], tools=tools
    )
    assert raw.headers["x-ctxsvc-forked-from"] == sid


def test_same_history_under_another_model_or_system_is_another_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    first, second = register(server, provider), register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    ids = []
    for model, system in ((first, "A"), (second, "A"), (first, "B"), (first, "A")):
        script.answers.append("ok")
        raw = client.chat.completions.with_raw_response.create(
            model=model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        )
        ids.append(raw.headers["x-ctxsvc-session-id"])
    assert len(set(ids[:3])) == 3
    # The same first request again is a retry of the first session's: a fork of it.
    assert ids[3] not in ids[:3]


def test_a_request_that_cannot_fit_fails_before_the_provider_is_called(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, _ = fake
    model = register(server, provider, context_window_tokens=2000, max_output_tokens=500)
    client = sdk(server)
    request.addfinalizer(client.close)
    before = len(provider.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "word " * 4000}]
        )
    assert refused.value.status_code == 400
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["code"] == "message_too_large"
    assert len(provider.requests) == before


def test_errors_are_the_sdks_own_exceptions(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    client = sdk(server)
    request.addfinalizer(client.close)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert "no-such-model" in missing.value.message
    provider, _ = fake
    model = register(server, provider)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Ctxsvc-Session-Id": "ses-none"},
        )
    assert isinstance(unknown.value.body, dict)
    assert unknown.value.body["code"] == "session_not_found"
    with pytest.raises(openai.BadRequestError) as empty:
        client.chat.completions.create(model=model, messages=[])
    assert isinstance(empty.value.body, dict)
    assert empty.value.body["code"] == "invalid_messages"
    stranger = openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key="sk-wrong", max_retries=0
    )
    request.addfinalizer(stranger.close)
    with pytest.raises(openai.AuthenticationError):
        stranger.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}])


def test_a_long_conversation_is_compacted_while_the_client_resends_everything(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider, context_window_tokens=6000, max_output_tokens=500)
    client = sdk(server)
    request.addfinalizer(client.close)
    history: list[Any] = [{"role": "system", "content": "You review logs."}]
    compacted_at = None
    sessions = set()
    for round_ in range(12):
        history.append({"role": "user", "content": f"Log part {round_}: " + "line ok " * 250})
        script.answers.append(f"Part {round_} looks fine.")
        raw = client.chat.completions.with_raw_response.create(model=model, messages=history)
        sessions.add(raw.headers["x-ctxsvc-session-id"])
        assert "x-ctxsvc-forked-from" not in raw.headers
        history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
        if raw.headers["x-ctxsvc-compacted"] == "true" and compacted_at is None:
            compacted_at = round_
            sent = script.bodies[-1]["messages"]
            # The provider got the checkpoint instead of the history the client still holds.
            assert len(sent) < len(history)
            assert history[1] not in sent
            assert "Primary Request and Intent" in json.dumps(sent)
            assert f"Log part {round_}:" in json.dumps(sent)
        assert int(raw.headers["x-ctxsvc-input-tokens"]) <= int(
            raw.headers["x-ctxsvc-effective-input-tokens"]
        )
    assert compacted_at is not None
    assert 0 < compacted_at < 11  # mid-conversation; later rounds went on after it
    (sid,) = sessions  # one session throughout: the compaction did not break the matching
    assert len(stored(server, sid)) == 24  # every message stays stored


def test_the_responses_and_anthropic_sdks_reach_the_same_kind_of_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)  # an OpenAI Chat model, whatever protocol the caller speaks
    client = sdk(server)
    request.addfinalizer(client.close)
    script.answers.append("From Responses.")
    raw = client.responses.with_raw_response.create(model=model, input="Hello?")
    assert raw.parse().output_text == "From Responses."
    sid = raw.headers["x-ctxsvc-session-id"]
    assert session(server, sid)["origin"] == "proxy:openai_responses"

    claude = anthropic.Anthropic(
        base_url=f"{server.url}/v1/compat/anthropic", api_key=SERVICE_KEY, max_retries=0
    )
    request.addfinalizer(claude.close)
    script.answers.append("From Messages.")
    answer = claude.messages.with_raw_response.create(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "Hello?"}]
    )
    message = answer.parse()
    assert [b.text for b in message.content if b.type == "text"] == ["From Messages."]
    sid = answer.headers["x-ctxsvc-session-id"]
    assert session(server, sid)["origin"] == "proxy:anthropic_messages"
    # Streamed through both SDKs' stream helpers, on the sessions just made.
    script.answers.append("Streamed Messages.")
    with claude.messages.stream(
        model=model,
        max_tokens=100,
        messages=[
            {"role": "user", "content": "Hello?"},
            {"role": "assistant", "content": "From Messages."},
            {"role": "user", "content": "Again?"},
        ],
    ) as stream:
        assert "".join(stream.text_stream) == "Streamed Messages."
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn"
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant"] * 2
    script.answers.append("Streamed Responses.")
    with client.responses.stream(model=model, input="Hello, streamed?") as events:
        done = events.get_final_response()
    assert done.output_text == "Streamed Responses."
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(
            model="no-such-model", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )


def test_langchain_chat_openai_runs_a_tool_loop_on_one_session(
    server: ServerProcess, fake: tuple[FakeProviderServer, ScriptedChat]
) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return {"a.py": "print('hello')"}[path]

    provider, script = fake
    model = register(server, provider)
    chat = ChatOpenAI(
        model=model,
        base_url=f"{server.url}/v1/compat/openai",
        api_key=SERVICE_KEY,
        max_retries=0,
        include_response_headers=True,
    ).bind_tools([read])
    script.answers.extend([[("call_a", "read", '{"path": "a.py"}')], "It prints hello."])
    messages: list[Any] = [HumanMessage("What does a.py print?")]
    sessions = set()
    for _ in range(2):
        answer = chat.invoke(messages)
        sessions.add(answer.response_metadata["headers"]["x-ctxsvc-session-id"])
        messages.append(answer)
        for call in answer.tool_calls:  # LangChain re-serializes the arguments it parsed
            messages.append(ToolMessage(read.invoke(call["args"]), tool_call_id=call["id"]))
    assert answer.content == "It prints hello."
    (sid,) = sessions
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant", "tool", "assistant"]


def test_provider_errors_pass_through_in_the_protocols_shape(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    # The fake's script is empty: it drops the connection (retried, then passed on as a 502).
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert failed.value.status_code == 502
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["code"] == "server_error"
    # Streamed, the failure is the stream's error event: the SDK raises it while iterating.
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError, match="the connection to the provider") as broken:
        list(stream)
    assert isinstance(broken.value.body, dict)
    assert broken.value.body["code"] == "server_error"
    # The question stayed stored: the retry continues the same session, storing nothing twice.
    script.answers.append("Back.")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().choices[0].message.content == "Back."
    assert "x-ctxsvc-forked-from" not in raw.headers
    rows = stored(server, raw.headers["x-ctxsvc-session-id"])
    assert [m["role"] for m in rows] == ["user", "assistant"]


def test_a_named_session_and_the_callers_own_provider_key(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    script.answers.append("One.")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "first"}]
    )
    sid = raw.headers["x-ctxsvc-session-id"]
    # Naming the session, the client sends only its new message; with its own provider key.
    script.answers.append("Two.")
    raw = client.chat.completions.with_raw_response.create(
        model=model,
        messages=[{"role": "user", "content": "second"}],
        extra_headers={"X-Ctxsvc-Session-Id": sid, "X-Ctxsvc-Provider-Key": "sk-callers-own"},
    )
    assert raw.headers["x-ctxsvc-session-id"] == sid
    assert provider.requests[-1].headers["authorization"] == "Bearer sk-callers-own"
    sent = [m["content"] for m in script.bodies[-1]["messages"] if m["role"] != "system"]
    assert sent == ["first", "One.", "second"]
    assert [m["content"][0]["text"] for m in stored(server, sid)] == [
        "first",
        "One.",
        "second",
        "Two.",
    ]
    assert "sk-callers-own" not in server.log()


def test_another_tenant_neither_names_nor_continues_a_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    history = [{"role": "user", "content": "A question both tenants ask."}]
    script.answers.append("Answer.")
    mine = client.chat.completions.with_raw_response.create(model=model, messages=history)
    sid = mine.headers["x-ctxsvc-session-id"]
    issued = httpx.post(
        f"{server.url}/v1/admin/keys",
        json={"tenant_id": f"t-{uuid.uuid4().hex[:8]}", "scope": "tenant"},
        headers=AUTH,
        timeout=30,
    )
    assert issued.status_code == 201, issued.text
    other = openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai",
        api_key=issued.json()["key"],
        max_retries=0,
        timeout=60,
    )
    request.addfinalizer(other.close)
    with pytest.raises(openai.NotFoundError) as hidden:
        other.chat.completions.create(
            model=model, messages=history, extra_headers={"X-Ctxsvc-Session-Id": sid}
        )
    assert isinstance(hidden.value.body, dict)
    assert hidden.value.body["code"] == "session_not_found"
    # The registered model is the default tenant's own: the other tenant does not see it.
    with pytest.raises(openai.NotFoundError):
        other.chat.completions.create(model=model, messages=history)
    assert len(stored(server, sid)) == 2  # nothing stored by the other tenant's calls


def test_a_client_that_leaves_mid_stream_closes_the_provider_call_and_stores_no_answer(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server)
    request.addfinalizer(client.close)
    history = [{"role": "user", "content": "Tell me a long story."}]
    abandoned = provider.abandoned
    # The provider sends its first words, then one more piece a second apart.
    pieces = ["Once ", *["upon a time " for _ in range(30)]]
    script.answers.append(StreamReply(openai_stream(text=pieces), event_delay=1.0))
    with client.chat.completions.with_streaming_response.create(
        model=model, messages=history, stream=True
    ) as streamed:
        sid = streamed.headers["x-ctxsvc-session-id"]
        for chunk in streamed.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                break  # the client has seen the first words and goes away
    asyncio.run(provider.abandoned_by_client(abandoned + 1, within=60))
    assert [m["role"] for m in stored(server, sid)] == ["user"]
    # Asked again, the same history continues the session: nothing forked, nothing twice.
    script.answers.append("Short story.")
    raw = client.chat.completions.with_raw_response.create(model=model, messages=history)
    assert raw.headers["x-ctxsvc-session-id"] == sid
    assert [m["role"] for m in stored(server, sid)] == ["user", "assistant"]
