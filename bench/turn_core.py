"""A turn's per-call core work — ``prepare()`` and the prefix record — with and without the
previous call's result to build on (``prepare(extends=...)``, ``record_extending``,
what the turn runner passes: ``app.services.turns.memory``), alternating, in one process.

A turn of five model calls on a stored conversation of N messages (each with its stored
figure, as the conversation cache hands them out): each call sees the conversation two messages
longer (an assistant tool call and its result). Printed per size: the median time of the calls
after the first (those that have a previous call) and of the first, from scratch and built on
the previous call, and their ratio. The first call has nothing to build on: the same either way.

Run: ``.venv/bin/python bench/turn_core.py [sizes...]`` (default 100 1000 10000)
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from app.core.caching import prefix_record as prefix
from app.core.capabilities import ModelCapabilities
from app.core.content import CachedMeasure, Item, compact_json
from app.core.counting import ESTIMATE
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall, PruningWatermark
from app.fastjson import content_bytes
from tests.core.factories import assistant, call, part, tool, tool_def, user

CAPS = ModelCapabilities(4_000_000, 16_384)
SYSTEM = [part("core/agent-system", "You are a bench agent."), part("project", "Notes.")]
TOOLS = [tool_def("read"), tool_def("grep")]
CALLS = 5


def stored(item: Item) -> Item:
    return replace(item, cached=CachedMeasure("estimate", len(compact_json(item.content))))


def conversation(n: int) -> list[Item]:
    items: list[Item] = []
    for i in range(n // 3):
        seq = 3 * i
        items += [
            stored(user(f"question {i} " * 10, mid=f"u{i}", seq=seq + 1)),
            stored(assistant("thinking " * 5, call(f"c{i}"), mid=f"a{i}", seq=seq + 2)),
            stored(tool(f"c{i}", f"result {i} " * 30, mid=f"t{i}", seq=seq + 3)),
        ]
    return items


def turn(base: list[Item], build_on: bool) -> tuple[float, list[float]]:
    """The first call's time and the later calls' times (seconds)."""
    items = list(base)
    previous: PreparedModelCall | None = None
    basis: prefix.RecordBasis | None = None
    times: list[float] = []
    for k in range(CALLS):
        seq = 1_000_000 + 2 * k
        items = [
            *items,
            stored(assistant("", call(f"n{k}"), mid=f"x{k}", seq=seq)),
            stored(tool(f"n{k}", "ok", mid=f"y{k}", seq=seq + 1)),
        ]
        started = time.perf_counter()
        prepared = prepare(
            SYSTEM,
            items,
            TOOLS,
            CAPS,
            PruningWatermark(),
            ESTIMATE,
            extends=previous if build_on else None,
        )
        _, built = prefix.record_extending(
            prepared,
            items,
            basis if build_on else None,
            identify_stored=True,
            dumps=content_bytes,
        )
        times.append(time.perf_counter() - started)
        previous, basis = prepared, built
    return times[0], times[1:]


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1_000, 10_000]
    for n in sizes:
        base = conversation(n)
        firsts: dict[bool, list[float]] = {False: [], True: []}
        laters: dict[bool, list[float]] = {False: [], True: []}
        rounds = max(5, 30_000 // max(n, 1))
        for _ in range(rounds):  # alternating
            for build_on in (False, True):
                first, later = turn(base, build_on)
                firsts[build_on].append(first)
                laters[build_on] += later
        scratch, built = statistics.median(laters[False]), statistics.median(laters[True])
        print(
            f"{len(base):>6} messages: later calls from scratch {scratch * 1e3:.3f} ms, built on "
            f"the previous call {built * 1e3:.3f} ms = {built / scratch:.2f}×; first call "
            f"{statistics.median(firsts[False]) * 1e3:.3f} / "
            f"{statistics.median(firsts[True]) * 1e3:.3f} ms"
        )


if __name__ == "__main__":
    main()
