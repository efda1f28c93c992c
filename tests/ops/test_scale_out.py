"""Several replicas append to one session at once (spec §5: gapless sequences across replicas).

Four ``uvicorn`` processes share one migrated PostgreSQL database; eight clients per process
append to the same session. Besides plain user messages, pairs of clients on different replicas
race to answer the same tool call and to open the same tool call id, so exactly one of each pair
must lose with the spec §5 conflict — every other request must succeed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.api.helpers import assistant_calls, session_body, tool_result, user
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.postgres]

PROCESSES = 4
CLIENTS_PER_PROCESS = 8
APPENDS_PER_CLIENT = 10
RACES = PROCESSES * CLIENTS_PER_PROCESS // 2  # each race is fought by two clients
TIME_LIMIT_SECONDS = 90


@pytest.fixture
def replicas(postgres_url: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    env = clean_env(
        CTXSVC_DATABASE_URL=postgres_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
    )
    commands = [uvicorn_command(free_port()) for _ in range(PROCESSES)]
    with running(commands, env=env, cwd=tmp_path) as servers:
        yield servers


class Outcomes:
    def __init__(self) -> None:
        self.sequences: list[int] = []
        self.refusals: Counter[str] = Counter()
        self.unexpected: list[str] = []

    def record(self, what: str, response: httpx.Response) -> None:
        if response.status_code == 201:
            self.sequences.extend(m["sequence"] for m in response.json()["messages"])
        elif response.status_code == 409 and response.json()["code"] in {
            "tool_result_already_posted",
            "duplicate_tool_call_id",
        }:
            self.refusals[response.json()["code"]] += 1
        else:
            self.unexpected.append(f"{what}: {response.status_code} {response.text}")


async def _client(
    server: ServerProcess, session_id: str, client_no: int, outcomes: Outcomes
) -> None:
    race = client_no // 2  # clients 2k and 2k+1 sit on different replicas (see the caller)
    url = f"/v1/sessions/{session_id}/messages"
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as client:
        for i in range(APPENDS_PER_CLIENT):
            if i == 3:
                body: dict[str, Any] = {"messages": [tool_result(f"open-{race}", "done")]}
            elif i == 6:
                body = {"messages": [assistant_calls((f"dup-{race}", "read"))]}
            else:
                body = {"messages": [user(f"client {client_no} message {i}")]}
            outcomes.record(f"client {client_no} append {i}", await client.post(url, json=body))


async def test_replicas_allocate_gapless_sequences_for_one_session(
    replicas: list[ServerProcess],
) -> None:
    async with httpx.AsyncClient(base_url=replicas[0].url, timeout=30.0) as setup:
        created = await setup.post("/v1/sessions", json=session_body())
        assert created.status_code == 201, created.text
        session_id = created.json()["id"]
        # The calls the racing pairs will answer.
        opened = await setup.post(
            f"/v1/sessions/{session_id}/messages",
            json={
                "messages": [
                    user("start"),
                    assistant_calls(*((f"open-{k}", "read") for k in range(RACES))),
                ]
            },
        )
        assert opened.status_code == 201, opened.text

    outcomes = Outcomes()
    with anyio.fail_after(TIME_LIMIT_SECONDS):
        async with anyio.create_task_group() as group:
            for client_no in range(PROCESSES * CLIENTS_PER_PROCESS):
                # Round-robin: neighbours (the two racers of a pair) hit different replicas.
                server = replicas[client_no % PROCESSES]
                group.start_soon(_client, server, session_id, client_no, outcomes)

    assert outcomes.unexpected == []
    # One winner and one loser per race, for both kinds of race.
    assert outcomes.refusals == {
        "tool_result_already_posted": RACES,
        "duplicate_tool_call_id": RACES,
    }

    stored: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=replicas[-1].url, timeout=30.0) as reader:
        after = 0
        while True:
            page = await reader.get(
                f"/v1/sessions/{session_id}/messages",
                params={"after_sequence": after, "limit": 500},
            )
            assert page.status_code == 200, page.text
            stored.extend(page.json()["messages"])
            if not page.json()["has_more"]:
                break
            after = page.json()["next_after_sequence"]

    attempts = PROCESSES * CLIENTS_PER_PROCESS * APPENDS_PER_CLIENT
    expected_total = 2 + attempts - 2 * RACES  # set-up messages + winners
    sequences = [m["sequence"] for m in stored]
    assert sequences == list(range(1, expected_total + 1))  # no gap, no duplicate
    # Every acknowledged sequence is a distinct stored row.
    assert sorted(outcomes.sequences) == list(range(3, expected_total + 1))
    texts = Counter(
        m["content"][0]["text"] for m in stored if m["role"] == "user" and m["sequence"] > 1
    )
    assert len(texts) == PROCESSES * CLIENTS_PER_PROCESS * (APPENDS_PER_CLIENT - 2)
    assert set(texts.values()) == {1}
