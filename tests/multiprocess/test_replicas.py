"""Two real server processes on one PostgreSQL (spec §5 scale-out, §6 leases): one running turn
per session across replicas, crash recovery by lease expiry, SSE resume on another replica."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import anyio
import httpx
import pytest

from tests.api.helpers import (
    append,
    assistant,
    assistant_calls,
    new_session,
    scripted_model,
    user,
)
from tests.api.test_turns import agent, call, history, ok, post_results
from tests.multiprocess.conftest import FAKE_KEY_ENV
from tests.multiprocess.servers import read_events
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream
from tests.servers import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.postgres]


def clients(replicas: list[ServerProcess]) -> list[httpx.AsyncClient]:
    return [httpx.AsyncClient(base_url=r.url, timeout=20) for r in replicas]


async def waiting_session(api: httpx.AsyncClient) -> str:
    model_id = await scripted_model(api, [{"tool_calls": [call("read", path="a")]}, {"text": "ok"}])
    return await new_session(api, model_id=model_id, agent=agent())


async def test_fifty_concurrent_starts_accept_exactly_one_turn(
    steady_replicas: list[ServerProcess],
) -> None:
    a, b = clients(steady_replicas)
    async with a, b:
        sid = await waiting_session(a)
        request_ids = [f"req-{i % 10}" for i in range(50)]

        async def start(i: int) -> httpx.Response:
            body = {"client_request_id": request_ids[i], "input": [{"type": "text", "text": "go"}]}
            return await (a, b)[i % 2].post(f"/v1/sessions/{sid}/turns", json=body)

        with anyio.fail_after(60):
            responses = await asyncio.gather(*(start(i) for i in range(50)))
        assert {r.status_code for r in responses} <= {200, 202, 409}, [r.text for r in responses]
        accepted = [r for r in responses if r.status_code == 202]
        assert len(accepted) == 1
        winner = accepted[0].json()
        for response in responses:
            body = response.json()
            if response.status_code == 200:
                assert body["turn_id"] == winner["turn_id"]
                assert body["client_request_id"] == winner["client_request_id"]
            elif response.status_code == 409:
                assert body["code"] == "busy"
                assert body["turn_id"] == winner["turn_id"]
        users = [m for m in await history(a, sid) if m["role"] == "user"]
        assert len(users) == 1


async def test_sigkill_during_a_model_call_interrupts_the_turn_after_the_lease(
    replicas: list[ServerProcess], slow_provider: FakeProviderServer
) -> None:
    victim, _survivor = replicas
    a, b = clients(replicas)
    async with a, b:
        model_id = f"fake-{uuid.uuid4().hex[:8]}"
        model = {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "openai_chat",
                "base_url": slow_provider.base_url + "/v1",
                "model_name": "gpt-fake",
                "api_key_env": FAKE_KEY_ENV,
            },
        }
        assert (await a.put(f"/v1/models/{model_id}", json=model)).status_code == 201
        slow_provider.enqueue(StreamReply(openai_stream(text=["never delivered"])))
        sid = await new_session(a, model_id=model_id, agent=agent())
        assert (await append(a, sid, assistant_calls(("dangling", "read")))).status_code == 201
        body = {"client_request_id": "crash", "input": [{"type": "text", "text": "go"}]}
        tid = (await a.post(f"/v1/sessions/{sid}/turns", json=body)).json()["turn_id"]
        await slow_provider.arrived()  # the model call is pending
        before = await history(b, sid)
        victim.kill()
        with anyio.fail_after(10):
            while True:
                turn = (await b.get(f"/v1/sessions/{sid}/turns/{tid}")).json()
                if turn["status"] != "running":
                    break
                await asyncio.sleep(0.1)
        assert turn["status"] == "interrupted"
        assert turn["outcome"]["code"] == "process_restart"
        assert await history(b, sid) == before  # nothing lost, nothing duplicated or replayed
        # The same request id still names the interrupted turn; a new one can start.
        same = await b.post(f"/v1/sessions/{sid}/turns", json=body)
        assert same.status_code == 200
        assert same.json()["turn_id"] == tid
        scripted = await scripted_model(b, [{"text": "fresh start"}])
        assert (
            await b.patch(f"/v1/sessions/{sid}", json={"model_id": scripted})
        ).status_code == 200
        fresh = await b.post(
            f"/v1/sessions/{sid}/turns",
            params={"wait": "true"},
            json={"client_request_id": "after", "input": [{"type": "text", "text": "again"}]},
        )
        assert fresh.status_code == 202
        assert fresh.json()["status"] == "completed"
        context = (await b.get(f"/v1/sessions/{sid}/context")).json()
        (synthesized,) = [m for m in context["request"]["messages"] if m["role"] == "tool"]
        assert synthesized["content"][0]["id"] == "dangling"
        assert synthesized["content"][0]["state"] == "interrupted"
        assert len(slow_provider.requests) == 1  # the interrupted call was never resent


async def test_sse_resume_on_another_replica_gets_every_update_once(
    replicas: list[ServerProcess],
) -> None:
    a, b = clients(replicas)
    async with a, b:
        sid = await waiting_session(a)
        url = f"/v1/sessions/{sid}/events"
        first: list[Any] = []
        connected = anyio.Event()

        async def listen_a() -> None:
            first.extend(await read_events(a, url, limit=3, on_comment=lambda _: connected.set()))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(listen_a)
                await connected.wait()
                turn = (
                    await b.post(
                        f"/v1/sessions/{sid}/turns",
                        params={"wait": "true"},
                        json={"client_request_id": "x", "input": [{"type": "text", "text": "go"}]},
                    )
                ).json()
            assert len(first) == 3
            rest: list[Any] = []

            async def listen_b() -> None:
                rest.extend(await read_events(b, url, headers={"Last-Event-ID": str(first[-1].id)}))

            async with anyio.create_task_group() as group:
                group.start_soon(listen_b)
                (pending,) = turn["pending_tool_calls"]
                await post_results(a, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=False)
            everything = await read_events(a, url)
        durable = [e for e in first + rest if e.id is not None]
        assert [e.id for e in durable] == [e.id for e in everything]
        assert [e.data for e in durable] == [e.data for e in everything]
        assert durable[-1].event == "turn_finished"


async def test_compactions_racing_appends_cover_only_what_they_read(
    replicas: list[ServerProcess],
) -> None:
    """Appends on both replicas while manual compactions run: every compaction is stored or
    refused with a documented conflict, and every checkpoint names a last user request inside
    the messages it covers (whatever the interleaving)."""
    a, b = clients(replicas)
    async with a, b:
        sid = await new_session(a)
        for i in range(4):
            seed = await append(a, sid, user(f"request {i}"), assistant(f"answer {i}"))
            assert seed.status_code == 201, seed.text

        async def appends(loop: int) -> list[httpx.Response]:
            return [
                await (a, b)[i % 2].post(
                    f"/v1/sessions/{sid}/messages",
                    json={"messages": [user(f"loop {loop} message {i}")]},
                )
                for i in range(25)
            ]

        async def compactions() -> list[httpx.Response]:
            return [
                await (b, a)[i % 2].post(
                    f"/v1/sessions/{sid}/compactions", json={"allow_larger": True}
                )
                for i in range(5)
            ]

        with anyio.fail_after(120):
            *appended, compacted = await asyncio.gather(
                *(appends(n) for n in range(4)), compactions()
            )
        assert all(r.status_code == 201 for batch in appended for r in batch)
        outcomes = [(r.status_code, r.json().get("code")) for r in compacted]
        assert all(o in {(201, None), (409, "compaction_conflict")} for o in outcomes), outcomes
        assert (201, None) in outcomes
        listed = (await a.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"]
        for summary in listed:
            one = (await a.get(f"/v1/sessions/{sid}/compactions/{summary['compaction_id']}")).json()
            assert one["last_user_message_sequence"] <= one["through_message_sequence"], one
        assert [m["sequence"] for m in await history(a, sid)] == list(range(1, 109))
