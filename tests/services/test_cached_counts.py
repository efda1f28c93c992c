"""Per-message counts are computed once, whatever wrote the message (spec §3.4).

A counting wrapper around the real counters is injected through the container's counter factory;
the tests read which messages it was asked to measure, and when.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence

import pytest

from app.api.schemas.sessions import SessionCreate
from app.container import Container
from app.core.capabilities import ModelCapabilities
from app.core.content import Block, CachedMeasure, Item, RealOrigin, Role, text_block
from app.core.counting import CounterWrapper, TokenCounter
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from app.providers.tokenizers import get_counter
from app.services.model_types import ProviderSpec
from app.storage.database import unit_of_work
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

O200K = "tiktoken:o200k_base"
CL100K = "tiktoken:cl100k_base"


class CountingCounter(CounterWrapper):
    """The real counter, remembering the content of every message it measures."""

    def __init__(self, inner: TokenCounter) -> None:
        super().__init__(inner)
        self.measured: list[Sequence[Block]] = []

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        self.measured.append(content)
        return self._inner.measure_message(role, content)

    def take(self) -> list[Sequence[Block]]:
        """The contents measured since the last call."""
        taken, self.measured = self.measured, []
        return taken


class Counters:
    def __init__(self) -> None:
        self.by_name: dict[str, CountingCounter] = {}

    def __call__(self, name: str) -> TokenCounter:
        if name not in self.by_name:
            self.by_name[name] = CountingCounter(get_counter(name))
        return self.by_name[name]


@pytest.fixture
def counters() -> Counters:
    return Counters()


@pytest.fixture
async def container(database_url: str, counters: Counters) -> AsyncIterator[Container]:
    built = Container.build(make_settings(database_url), counter_factory=counters)
    try:
        yield built
    finally:
        await built.aclose()


async def new_session(container: Container, counter: str = O200K) -> str:
    model_id = f"exact-{uuid.uuid4().hex[:8]}"
    capabilities = ModelCapabilities(
        context_window_tokens=10_000_000, max_output_tokens=4_000, token_counter=counter
    )
    await container.models.put("default", model_id, capabilities, ProviderSpec(kind="local"))
    created = await container.sessions.create(
        SessionCreate.model_validate(
            {
                "model_id": model_id,
                "agent": {"system_prompt": "You are a careful agent.", "tools": []},
                "sandbox": {"mode": "auto", "available": True},
            }
        ),
        "default",
    )
    return created.id


def message(index: int) -> NewMessage:
    role: Role = "user" if index % 2 == 0 else "assistant"
    return NewMessage(role=role, kind="normal", content=[text_block(f"message {index} says hi")])


async def write_without_counts(container: Container, session_id: str, n: int, first: int) -> None:
    """As World State and the turn runner write: through the repository, no exact figures."""
    async with unit_of_work(container.db) as db:
        await MessageRepository(db).append(session_id, [message(first + i) for i in range(n)])


def texts(contents: Sequence[Sequence[Block]]) -> list[str]:
    return [str(block.get("text")) for content in contents for block in content]


async def test_a_prepare_after_one_append_tokenizes_only_the_new_message(
    container: Container, counters: Counters
) -> None:
    session_id = await new_session(container)
    await write_without_counts(container, session_id, 10_000, first=0)
    first = (await container.inspection.inspection(session_id)).prepared.budget
    o200k = counters.by_name[O200K]
    # Stored without figures: each message is tokenized once, on the first read ...
    assert len(o200k.take()) == 10_000
    again = (await container.inspection.inspection(session_id)).prepared.budget
    # ... and never again: the figures were stored.
    assert o200k.take() == []
    assert again == first

    await container.messages.append(session_id, [("user", "normal", [text_block("one more")])])
    after = (await container.inspection.inspection(session_id)).prepared.budget
    assert texts(o200k.take()) == ["one more"]  # at append, and nothing at prepare
    grown = after.conversation_tokens - first.conversation_tokens
    assert grown == get_counter(O200K).measure_message("user", [text_block("one more")])


async def test_messages_written_without_figures_are_counted_once(
    container: Container, counters: Counters
) -> None:
    session_id = await new_session(container)
    await container.messages.append(session_id, [("user", "normal", [text_block("hello")])])
    await write_without_counts(container, session_id, 1, first=7)  # e.g. a World State message
    counters.by_name[O200K].take()

    first = (await container.inspection.inspection(session_id)).prepared.budget
    assert texts(counters.by_name[O200K].take()) == ["message 7 says hi"]
    second = (await container.inspection.inspection(session_id)).prepared.budget
    assert counters.by_name[O200K].take() == []
    # The cached figures give exactly what counting everything from scratch gives.
    scratch = get_counter(O200K)
    expected = 3 + sum(  # reply priming + each framed message
        scratch.measure_message(role, [text_block(t)])
        for role, t in (("user", "hello"), ("assistant", "message 7 says hi"))
    )
    assert first.conversation_tokens == expected
    assert second == first


async def test_a_fill_keeps_the_figures_of_other_counters(container: Container) -> None:
    session_id = await new_session(container)
    async with unit_of_work(container.db) as db:
        await MessageRepository(db).append(
            session_id,
            [
                NewMessage(
                    "user",
                    "normal",
                    [text_block("from an earlier model")],
                    token_counts={CL100K: 9},
                )
            ],
        )
    await container.inspection.inspection(session_id)
    async with unit_of_work(container.db, read_only=True) as db:
        (row,) = await MessageRepository(db).load(session_id)
    assert row.token_counts[CL100K] == 9
    assert row.token_counts[O200K] == get_counter(O200K).measure_message(
        "user", [text_block("from an earlier model")]
    )


def tool_turn(sequence: int, output: str) -> list[Item]:
    call: Block = {"type": "tool_call", "id": f"c{sequence}", "name": "bash", "input": "{}"}
    result: Block = {
        "type": "tool_result",
        "id": f"c{sequence}",
        "name": "bash",
        "output": [text_block(output)],
        "state": "success",
    }
    return [
        Item("assistant", "normal", [call], RealOrigin(f"m{sequence}", sequence)),
        Item("tool", "normal", [result], RealOrigin(f"m{sequence + 1}", sequence + 1)),
    ]


def cached(items: list[Item], counter: TokenCounter) -> list[Item]:
    return [
        Item(
            i.role,
            i.kind,
            i.content,
            i.origin,
            CachedMeasure(counter.name, counter.measure_message(i.role, i.content)),
        )
        for i in items
    ]


@pytest.mark.parametrize("name", ["estimate", O200K])
def test_pruned_and_truncated_results_are_counted_as_sent(name: str) -> None:
    counter = CountingCounter(get_counter(name))
    items = [
        Item("user", "normal", [text_block("go")], RealOrigin("m0", 0)),
        *tool_turn(1, "old log line\n" * 1_000),  # 13 000 characters: pruned (watermark 2)
        *tool_turn(3, "fresh output\n" * 4_000),  # 52 000 bytes: truncated by the projection
        *tool_turn(5, "short"),
    ]
    stored = cached(items, counter)
    counter.take()
    caps = ModelCapabilities(context_window_tokens=1_000_000, max_output_tokens=1_000)
    watermark = PruningWatermark(through_sequence=2)

    with_cache = prepare([], stored, [], caps, watermark, counter)
    assert with_cache.projection.pruned_tool_results == 1
    assert with_cache.projection.truncated_tool_results == 1
    # Only the two rewritten results are measured again, as they are sent.
    remeasured = counter.take()
    assert len(remeasured) == 2
    sent = [i.content for i in with_cache.items if i.role == "tool"][:2]
    assert remeasured == sent
    from_scratch = prepare([], items, [], caps, watermark, get_counter(name))
    assert with_cache.budget == from_scratch.budget
    stale = (
        counter.tokens(sum(i.cached.measure for i in stored if i.cached))
        + counter.request_overhead_tokens
    )
    assert with_cache.budget.conversation_tokens < stale
