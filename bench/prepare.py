"""Benchmark of the prepare pipeline (run: ``.venv/bin/python bench/prepare.py``).

Prints, for conversations of 100, 1 000 and 10 000 messages, measured in one run:
  (a) core ``prepare`` time (median of several runs), without and with cached per-message measures,
      and a first call with cached measures (nothing remembered: ``app/core/resume.py``), also
      with the salient-line memo empty (``app/core/salient.py``: a process's first prepare);
  (b) its ratio to one compact ``json.dumps`` of the prepared request (target ≤ 3 at 1 000);
  (c) the growth factor 1 000 → 10 000 (target ≤ 12: the pipeline is linear);
  (d) end-to-end ``POST /v1/prepare`` through the ASGI app (skipped if the app cannot be built);
  (e) a turn loop: one prepare per model call of a conversation growing by 2 messages a call;
  (f) what the salient lines cost (SPEC §9): the 10 000-message first call on freshly decoded
      strings (as a service reads them) with the salient-line memo warm, empty, and with no
      salient lines at all (the comparator, measured alternately in this run).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.prepare import prepare
from app.core.prepared import PruningWatermark
from app.core.resume import forget
from app.core.salient import forget as forget_salient_lines
from bench.fixtures import (
    BENCH_CAPABILITIES,
    agent_conversation,
    prepare_body,
    system_context,
    tool_definitions,
    with_cached_measures,
)

SIZES = (100, 1_000, 10_000)


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def core_figures() -> dict[int, dict[str, float]]:
    system, tools = system_context(), tool_definitions()
    figures: dict[int, dict[str, float]] = {}
    for n in SIZES:
        items = agent_conversation(n)
        cached = with_cached_measures(items)
        # The older half was pruned by an earlier compaction attempt (realistic watermark).
        watermark = PruningWatermark(through_sequence=n // 2)
        runs = 21 if n <= 1_000 else 7

        def run(conversation: list[Any] = items, watermark: PruningWatermark = watermark) -> Any:
            return prepare(system, conversation, tools, BENCH_CAPABILITIES, watermark)

        prepared = run()
        t_core = median_seconds(run, runs)
        t_cached = median_seconds(lambda c=cached: run(c), runs)
        t_first = median_seconds(lambda c=cached: (forget(), run(c)), runs)
        t_cold = median_seconds(lambda c=cached: (forget(), forget_salient_lines(), run(c)), runs)
        t_json = median_seconds(lambda p=prepared: dumps(p.request), runs)
        figures[n] = {"core": t_core, "cached": t_cached, "json": t_json}
        p = prepared.projection
        print(
            f"{n:>6} msgs: prepare {t_core * 1e3:8.2f} ms"
            f" | cached measures {t_cached * 1e3:8.2f} ms (first call {t_first * 1e3:8.2f} ms,"
            f" salient memo empty {t_cold * 1e3:8.2f} ms)"
            f" | json.dumps {t_json * 1e3:8.2f} ms | ratio {t_core / t_json:5.2f}"
            f" (cached {t_cached / t_json:5.2f})"
            f" | {len(dumps(prepared.request).encode()) / 1e6:6.2f} MB,"
            f" {prepared.budget.estimated_input_tokens} tokens, pruned {p.pruned_tool_results},"
            f" truncated {p.truncated_tool_results}"
        )
    return figures


async def end_to_end() -> None:
    try:
        import httpx

        from app.main import create_app
        from app.settings import Settings

        app = create_app(Settings(max_body_bytes=256 * 1024 * 1024))
    except Exception as error:  # the endpoint is optional for this script
        print(f"(d) skipped: the ASGI app could not be built ({error!r})")
        return
    system, tools = system_context(), tool_definitions()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for n in SIZES:
            items = agent_conversation(n)
            body = dumps(
                prepare_body(
                    system, items, tools, pruning=PruningWatermark(through_sequence=n // 2)
                )
            ).encode()
            headers = {"content-type": "application/json"}
            response = await client.post("/v1/prepare", content=body, headers=headers)
            if response.status_code != 200:
                print(f"(d) {n:>6} msgs: HTTP {response.status_code}: {response.text[:200]}")
                continue
            runs = 9 if n <= 1_000 else 3
            samples = []
            for _ in range(runs):
                start = time.perf_counter()
                response = await client.post("/v1/prepare", content=body, headers=headers)
                samples.append(time.perf_counter() - start)
            print(
                f"(d) {n:>6} msgs: POST /v1/prepare {statistics.median(samples) * 1e3:9.2f} ms"
                f" (body {len(body) / 1e6:.2f} MB)"
            )


def turn_loop(start: int = 150, calls: int = 20, runs: int = 50) -> None:
    """Median per call of ``calls`` prepares of a conversation growing by 2 messages a call."""
    system, tools = system_context(), tool_definitions()
    items = with_cached_measures(agent_conversation(start + 2 * calls))

    def loop() -> None:
        for k in range(calls):
            prepare(system, items[: start + 2 * k], tools, BENCH_CAPABILITIES)

    forget()
    per_call = median_seconds(loop, runs) / calls
    span = f"{start} → {start + 2 * calls}"
    print(f"(e) turn loop {span} msgs: prepare {per_call * 1e6:8.1f} µs per call")


def salient_cost(n: int = 10_000, runs: int = 7) -> None:
    from app.core import project, prune

    system, tools = system_context(), tool_definitions()
    cached = with_cached_measures(agent_conversation(n))
    watermark = PruningWatermark(through_sequence=n // 2)

    def fresh() -> list[Any]:
        # New string objects, as every read of the store gives: their hashes are not cached.
        return [replace(i, content=json.loads(dumps(i.content))) for i in cached]

    def timed(cold: bool) -> float:
        items = fresh()
        forget()
        if cold:
            forget_salient_lines()
        start = time.perf_counter()
        prepare(system, items, tools, BENCH_CAPABILITIES, watermark)
        return time.perf_counter() - start

    def none(*_: Any, **__: Any) -> tuple[()]:
        return ()

    samples: dict[str, list[float]] = {"warm": [], "empty": [], "without": []}
    real = prune.salient_lines, project.salient_lines
    for _ in range(runs):
        samples["warm"].append(timed(cold=False))
        samples["empty"].append(timed(cold=True))
        prune.salient_lines = project.salient_lines = none  # type: ignore[assignment]
        samples["without"].append(timed(cold=False))  # keeps the memo for the next warm run
        prune.salient_lines, project.salient_lines = real
    warm, empty, without = (statistics.median(samples[k]) for k in ("warm", "empty", "without"))
    print(
        f"(f) {n} msgs, first call on fresh strings: salient memo warm {warm * 1e3:.1f} ms, "
        f"empty {empty * 1e3:.1f} ms, without salient lines {without * 1e3:.1f} ms "
        f"(ratios {warm / without:.2f} / {empty / without:.2f})"
    )


def main() -> None:
    print("(a)/(b) core prepare vs one compact json.dumps of the prepared request")
    figures = core_figures()
    ratio = figures[1_000]["core"] / figures[1_000]["json"]
    growth = figures[10_000]["core"] / figures[1_000]["core"]
    print(f"(b) ratio at 1 000 messages: {ratio:.2f} (target ≤ 3) {'OK' if ratio <= 3 else 'MISS'}")
    print(
        f"(c) growth 1 000 → 10 000: {growth:.2f} (target ≤ 12) {'OK' if growth <= 12 else 'MISS'}"
    )
    asyncio.run(end_to_end())
    turn_loop()
    salient_cost()


if __name__ == "__main__":
    main()
