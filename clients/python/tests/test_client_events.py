"""``events()``: typed live updates that survive dropped connections, neither losing nor
repeating a durable update (the proxy drops the stream and refuses reconnections while a turn
runs; the client resumes with ``Last-Event-ID``)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from client_support import CuttableProxy
from ctxsvc_client import AsyncClient, Client, Event, NotFoundError
from tests.servers import ServerProcess

AGENT = {"system_prompt": "You are an agent."}
DEADLINE = 60.0  # generous: the machine may be loaded; nothing waits this long when all is well


def durable(events: list[Event]) -> list[tuple[int | None, str, dict[str, Any]]]:
    return [(e.sequence, e.type, e.payload) for e in events if e.sequence is not None]


def all_updates(server: ServerProcess, session_id: str, finished: int) -> list[Event]:
    """Every stored update, read on a fresh connection up to the ``finished``-th turn end."""
    seen: list[Event] = []
    with Client(server.url) as client:
        for event in client.events(session_id):
            seen.append(event)
            if [e.type for e in seen].count("turn_finished") == finished:
                return seen
    raise AssertionError("the stream ended")


class Listener(threading.Thread):
    """Follows a session's events through the proxy until ``stop_after`` turns finished."""

    def __init__(self, url: str, session_id: str, stop_after: int) -> None:
        super().__init__(daemon=True)
        self.url, self.session_id, self.stop_after = url, session_id, stop_after
        self.events: list[Event] = []
        self.finished = [threading.Event() for _ in range(stop_after)]
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Client(self.url, backoff=0.02, max_backoff=0.2) as client:
                for event in client.events(self.session_id, reconnects=10_000):
                    self.events.append(event)
                    if event.type == "turn_finished":
                        done = sum(e.type == "turn_finished" for e in self.events)
                        self.finished[done - 1].set()
                        if done == self.stop_after:
                            return
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait_finished(self, turns: int) -> None:
        assert self.finished[turns - 1].wait(DEADLINE), (self.error, durable(self.events))


def test_a_dropped_stream_resumes_without_losing_or_repeating_an_update(
    server: ServerProcess, proxy: CuttableProxy
) -> None:
    with Client(server.url, timeout=30) as direct:
        session = direct.create_session(model_id="local", agent=AGENT)
        listener = Listener(proxy.url, session.id, stop_after=3)
        listener.start()
        direct.run_turn(session.id, "First request.")
        listener.wait_finished(1)

        proxy.cut()  # the stream drops; reconnections are refused while the next turn runs
        direct.run_turn(session.id, "Second request, while nobody listens.")
        direct.append_messages(
            session.id, [{"role": "user", "content": [{"type": "text", "text": "Also."}]}]
        )
        proxy.resume()
        listener.wait_finished(2)

        proxy.cut()  # and once more, right after
        proxy.resume()
        direct.run_turn(session.id, "Third request.")
        listener.wait_finished(3)
    listener.join(DEADLINE)
    assert listener.error is None
    assert proxy.accepted >= 3  # it did reconnect

    expected = durable(all_updates(server, session.id, finished=3))
    received = durable(listener.events)
    assert received == expected
    sequences = [s for s, _, _ in received]
    assert sequences == list(range(1, len(sequences) + 1))  # none lost, none twice
    assert "messages_appended" in [t for _, t, _ in received]


@pytest.mark.anyio
async def test_the_async_stream_resumes_too(server: ServerProcess, proxy: CuttableProxy) -> None:
    received: list[Event] = []
    first, second = anyio.Event(), anyio.Event()
    async with AsyncClient(server.url, timeout=30) as direct:
        session = await direct.create_session(model_id="local", agent=AGENT)

        async def listen() -> None:
            async with AsyncClient(proxy.url, backoff=0.02, max_backoff=0.2) as client:
                async for event in client.events(session.id, reconnects=10_000):
                    received.append(event)
                    if event.type == "turn_finished":
                        (second if first.is_set() else first).set()
                        if second.is_set():
                            return

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(listen)
                await direct.run_turn(session.id, "One.")
                await first.wait()
                proxy.cut()
                await direct.run_turn(session.id, "Two, unheard.")
                proxy.resume()
                await second.wait()
    assert proxy.accepted >= 2
    expected = durable(all_updates(server, session.id, finished=2))
    assert durable(received) == expected


def test_updates_are_typed_and_after_skips_what_was_seen(server: ServerProcess) -> None:
    with Client(server.url, timeout=30) as client:
        session = client.create_session(model_id="local", agent=AGENT)
        turn = client.run_turn(session.id, "Hello.")
        updates = all_updates(server, session.id, finished=1)
        first = updates[0]
        assert (first.type, first.turn_id, first.sequence) == ("turn_started", turn.turn_id, 1)
        assert first.occurred_at is not None
        assert updates[-1].payload["status"] == "completed"
        later: list[Event] = []
        for event in client.events(session.id, after=2):
            later.append(event)
            if event.type == "turn_finished":
                break
    assert durable(later) == durable(updates)[2:]


def test_the_stream_of_an_unknown_session_raises_at_once(server: ServerProcess) -> None:
    with Client(server.url) as client, pytest.raises(NotFoundError) as caught:
        next(iter(client.events("ses-missing")))
    assert caught.value.code == "session_not_found"
