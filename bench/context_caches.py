"""What each reuse cache of a stored session's model calls buys, measured against turning it off.

    .venv/bin/python bench/context_caches.py [--sizes 1000 5000] [--calls 20] [--rounds 7]

A turn's loop as a session context runs it (``app/services/session_context.py``): a stored
session of N messages (figures cached, as stored), then ``--calls`` model calls, each adding an
assistant message and a tool result; per call the core ``prepare`` extending the previous call,
its prefix record on the previous basis, and the OpenAI Chat body's bytes
(``app/providers/encoding/wire.py``, its memo of each message's JSON kept). Variants, run
alternately within each round (fresh objects and empty caches for each), medians of the
rounds' CPU time per call:

- ``all``: every cache as the service runs them (the comparator, the floor);
- ``no walk carried``: the walk of the conversation's beginning not carried on from the
  previous call (``prepare(remember=False)``; ``extends`` still lends messages and measures);
- ``no message memo``: each message's JSON in the body encoded afresh (``wire._Memo`` off);
- ``o200k: memo`` / ``o200k: no memo``: the same loop counted by ``o200k_base``, with and without
  the service's digest memo around it (``MemoizedCounter``);
- ``o200k stateless: memo`` / ``no memo``: the stateless case the memo was made for: each call a
  request's own fresh objects (nothing extended or remembered), figures cached as stored.

Prints each variant's median per call and its ratio to ``all`` (to the memo's for the o200k
rows). ``--small`` prints the two per-row caches of a turn step instead, with and without:
``session_config._checked`` (a provided workspace of 100 000 layout entries, checked at each
``workspace_of``) and the tool-schema validators (``services/turns/tools.py``, a typical schema);
``--baselines [POSTGRES_URL]`` the read the World State baselines cache saves at each sample
(``services/world_state.py``: ``BaselineRepository.get_all`` in a transaction, on SQLite and,
given a server, PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import fastjson
from app.core.caching.prefix_record import RecordBasis
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall, PruningWatermark
from app.providers.encoding import wire
from app.providers.tokenizers import get_counter
from app.services.request_prefix import prefixed_extending
from app.services.salient_memo import SALIENT_LINES
from app.services.tokens import MemoizedCounter
from bench.fixtures import (
    BENCH_CAPABILITIES,
    agent_conversation,
    system_context,
    tool_definitions,
    with_cached_measures,
)

WATERMARK = PruningWatermark(None, None)


def turn_loop(size: int, calls: int, counter: TokenCounter, *, remember: bool) -> float:
    """CPU seconds per model call of one turn loop over a fresh session of ``size`` messages."""
    full = with_cached_measures(agent_conversation(size + 2 * calls), counter)
    system, tools = system_context(), tool_definitions()
    conversation: list[Item] = full[:size]
    prepared: PreparedModelCall | None = None
    basis: RecordBasis | None = None
    record: bytes | None = None
    # The session's first call (as after a restart) is not what is compared: one call first.
    spent = 0.0
    for call in range(calls + 1):
        start = time.process_time()
        prepared = prepare(
            system,
            conversation,
            tools,
            BENCH_CAPABILITIES,
            WATERMARK,
            counter,
            remember=remember,
            extends=prepared,
            salient=SALIENT_LINES,
        )
        prepared, basis = prefixed_extending(
            prepared, conversation, record, basis, identify_stored=True
        )
        wire.openai_chat_body(prepared.request, model="m", stream=True)
        record = prepared.prefix_record
        if call:
            spent += time.process_time() - start
        conversation = [*conversation, *full[size + 2 * call : size + 2 * call + 2]]
    return spent / calls


def stateless_loop(size: int, calls: int, counter: TokenCounter) -> float:
    """CPU seconds per call of ``calls`` stateless prepares of a growing conversation."""
    system, tools = system_context(), tool_definitions()
    spent = 0.0
    for call in range(calls):
        conversation = with_cached_measures(agent_conversation(size + 2 * call), counter)
        start = time.process_time()
        prepare(
            system,
            conversation,
            tools,
            BENCH_CAPABILITIES,
            WATERMARK,
            counter,
            remember=False,
            salient=SALIENT_LINES,
        )
        spent += time.process_time() - start
    return spent / calls


def variants(size: int, calls: int) -> dict[str, Callable[[], float]]:
    estimate = fastjson.ESTIMATE
    o200k = get_counter("tiktoken:o200k_base")
    return {
        "all": lambda: turn_loop(size, calls, estimate, remember=True),
        "no walk carried": lambda: turn_loop(size, calls, estimate, remember=False),
        "no message memo": lambda: _without_message_memo(size, calls, estimate),
        "o200k: memo": lambda: turn_loop(size, calls, MemoizedCounter(o200k), remember=True),
        "o200k: no memo": lambda: turn_loop(size, calls, o200k, remember=True),
        "o200k stateless: memo": lambda: stateless_loop(size, calls, MemoizedCounter(o200k)),
        "o200k stateless: no memo": lambda: stateless_loop(size, calls, o200k),
    }


def _without_message_memo(size: int, calls: int, counter: TokenCounter) -> float:
    original, chained = wire._openai_memo.get, wire._openai_memo.pieces

    def build(message: Any, make: Callable[[Any], bytes], _: Callable[[bytes], int]) -> bytes:
        return make(message)

    def pieces(messages: Any, make: Callable[[Any], bytes], _: Callable[[bytes], int]) -> Any:
        return [make(m) for m in messages]  # no conversation's chain either

    wire._openai_memo.get = build  # type: ignore[method-assign,assignment]
    wire._openai_memo.pieces = pieces  # type: ignore[method-assign]
    try:
        return turn_loop(size, calls, counter, remember=True)
    finally:
        wire._openai_memo.get = original  # type: ignore[method-assign]
        wire._openai_memo.pieces = chained  # type: ignore[method-assign]


def fresh() -> None:
    wire.forget()
    SALIENT_LINES.clear()


def small_caches(rounds: int) -> None:
    """CPU per lookup of the two small caches of a step, hit against what a miss costs."""
    from app.services import session_config
    from app.services.turns import tools
    from app.storage.models import AgentSession

    layout = [f"src/module_{i}/file_{i}.py" for i in range(100_000)]
    workspace = {"provided": {"working_directory": "/w", "layout": layout}}
    session = AgentSession(id="s", workspace=workspace)
    schema = (
        '{"type":"object","properties":{"path":{"type":"string"},"start":{"type":"integer"},'
        '"end":{"type":"integer"}},"required":["path"],"additionalProperties":false}'
    )

    def timed(run: Callable[[], object], clear: Callable[[], object] | None) -> float:
        samples = []
        for _ in range(rounds):
            if clear is not None:
                clear()
            start = time.process_time()
            run()
            samples.append(time.process_time() - start)
        return statistics.median(samples)

    def workspace_of() -> object:
        return session_config.workspace_of(session)

    def validator() -> object:
        return tools._validator(schema)

    checked = session_config._checked
    cases = {
        "workspace_of, checked kept": (workspace_of, None),
        "workspace_of, checked again": (workspace_of, lambda: checked.pop(session, None)),
        "tool validator, kept": (validator, None),
        "tool validator, built again": (validator, lambda: tools._validators.discard(schema)),
    }
    workspace_of(), validator()  # warm: the kept case starts with its entry
    for name, (run, clear) in cases.items():
        print(f"  {name:28} {timed(run, clear) * 1e6:10.1f} µs")


async def baseline_reads(url: str, rounds: int) -> float:
    """CPU + wait per read of a session's stored baselines (what a cache miss costs), median."""
    from app.services.world_state import _BaselineCache
    from app.storage.database import create_engine, create_session_factory, unit_of_work
    from app.storage.repositories.state import BaselineRepository
    from bench.store_setup import client_of, register_model_and_session

    async with client_of(url) as client:
        sid = await register_model_and_session(client)
        answer = await client.post(f"/v1/sessions/{sid}/prepare", json={})  # writes baselines
        assert answer.status_code == 200, answer.text
    engine = create_engine(url)
    factory = create_session_factory(engine)
    samples = []
    try:
        for _ in range(rounds):
            async with unit_of_work(factory) as db:
                await BaselineRepository(db).get_all(sid)  # the transaction is open already
                start = time.perf_counter()
                stored = await BaselineRepository(db).get_all(sid)
                samples.append(time.perf_counter() - start)
    finally:
        await engine.dispose()
    assert stored
    cache = _BaselineCache()
    cache.put(sid, "v", stored)
    start = time.perf_counter()
    for _ in range(1000):
        cache.get(sid, "v")
    print(f"  cache hit {(time.perf_counter() - start) * 1e3:.1f} µs", end="; ")
    return statistics.median(samples)


async def baselines(postgres: str | None, rounds: int) -> None:
    from bench.store_setup import postgres_database, sqlite_database

    async with sqlite_database() as url:
        print(f"SQLite read {await baseline_reads(url, rounds) * 1e6:.0f} µs")
    if postgres:
        async with postgres_database(postgres) as url:
            print(f"PostgreSQL read {await baseline_reads(url, rounds) * 1e6:.0f} µs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="the per-row caches of a step")
    parser.add_argument("--baselines", nargs="?", const="", default=None, metavar="POSTGRES_URL")
    args = parser.parse_args(argv)
    if args.baselines is not None:
        asyncio.run(baselines(args.baselines or None, max(args.rounds, 51)))
        return 0
    if args.small:
        small_caches(max(args.rounds, 21))
        return 0
    for size in args.sizes:
        runs = variants(size, args.calls)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run in runs.items():  # alternating: every round runs each once
                fresh()
                times[name].append(run())
        medians = {name: statistics.median(t) for name, t in times.items()}
        print(f"{size} messages, {args.calls} calls, {args.rounds} rounds (CPU ms per call):")
        for name, median in medians.items():
            floor = medians["all"]
            if name.startswith("o200k"):
                floor = medians[name.split(":")[0] + ": memo"]
            print(f"  {name:26} {median * 1000:8.3f} ms  {median / floor:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
