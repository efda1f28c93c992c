"""Benchmark of the prepare pipeline (run: ``.venv/bin/python bench/prepare.py``).

Prints, for conversations of 100, 1 000 and 10 000 messages, measured in one run:
  (a) core ``prepare`` time (median of several runs) from scratch (nothing remembered, no
      cached measures: as the stateless endpoint runs it) with the service's estimate counter
      (orjson, ``app.fastjson.ESTIMATE``) and with the core's stdlib one; of the same objects
      again on the first call's result (its walk carried on, measures not cached), with cached
      per-message measures on an earlier call, and a first call with cached measures (nothing
      to carry on from: ``app/core/pipeline/one_pass/continuation.py``), also with the
      salient-line memo empty (``app/core/pipeline/salient.py``: a process's first prepare);
  (b) its ratio to one compact ``json.dumps`` of the prepared request, and to LangChain's
      ``trim_messages`` (approximate counter, strategy ``last``, to the model's input budget) on
      the same conversation in this process — target ≤ 0.5× LangChain at 1 000 messages
      (``pip install -e '.[bench]'`` brings langchain-core);
  (c) the growth factor 1 000 → 10 000 (target ≤ 12: the pipeline is linear);
  (d) end-to-end ``POST /v1/prepare`` through uvicorn (a real server process on loopback)
      against a bare FastAPI endpoint that parses the same body with the same pydantic model
      and echoes it (``bench/echo_app.py``, its own uvicorn process), the same body alternating
      between them and LangChain's trim, each endpoint with two clients (``httpx.Client`` and
      the standard library's ``http.client``, ``bench/lean_client.py``) — targets ≤ 1.3× the
      echo and ≤ 2× LangChain's in-process trim at 1 000;
  (e) a turn loop: one prepare per model call of a conversation growing by 2 messages a call;
  (f) what the salient lines cost (spec §9): the 10 000-message first call on freshly decoded
      strings (as a service reads them) with the salient-line memo warm, empty, and with no
      salient lines at all (the comparator, measured alternately in this run).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from app import fastjson
from app.core.content import Item
from app.core.counting import ESTIMATE as STDLIB_ESTIMATE
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart
from app.services.salient_memo import SALIENT_LINES
from bench.fixtures import (
    BENCH_CAPABILITIES,
    agent_conversation,
    prepare_body,
    system_context,
    tool_definitions,
    with_cached_measures,
)
from bench.lean_client import LeanClient
from tests.servers import PYTHON, REPO_ROOT, clean_env, free_port, running, uvicorn_command

SIZES = (100, 1_000, 10_000)
CORE_TARGET = 0.5  # × LangChain's trim_messages, at 1 000 messages
HTTP_ECHO_TARGET = 1.3  # × the bare parse-and-echo endpoint
HTTP_LANGCHAIN_TARGET = 2.0  # × LangChain's trim_messages in-process


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def alternating_medians(fns: list[Callable[[], object] | None], runs: int) -> list[float]:
    """The median time of each of ``fns`` over ``runs`` rounds of one call each (after a
    warm-up round); NaN for a missing one."""
    samples: list[list[float]] = [[] for _ in fns]
    for round_ in range(runs + 1):
        for fn, times in zip(fns, samples, strict=True):
            if fn is None:
                continue
            start = time.perf_counter()
            fn()
            if round_:
                times.append(time.perf_counter() - start)
    return [statistics.median(t) if t else float("nan") for t in samples]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def langchain_trim(system: list[SystemPart], items: list[Item]) -> Callable[[], object] | None:
    """LangChain's ``trim_messages`` of the same conversation (converted before timing) to the
    model's effective input tokens, with its approximate counter; ``None`` without it."""
    try:
        from langchain_core.messages import (
            AIMessage,
            BaseMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
            trim_messages,
        )
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        return None

    def texts(blocks: list[Any]) -> str:
        return "\n".join(b["text"] for b in blocks if b["type"] == "text")

    first = system[0].content[0]
    assert first["type"] == "text"
    messages: list[BaseMessage] = [SystemMessage(first["text"])]
    for item in items:
        if item.role == "user":
            messages.append(HumanMessage(texts(item.content)))
        elif item.role == "assistant":
            calls = [
                {"name": b["name"], "args": json.loads(b["input"]), "id": b["id"]}
                for b in item.content
                if b["type"] == "tool_call"
            ]
            messages.append(AIMessage(texts(item.content), tool_calls=calls))
        else:
            result = item.content[0]
            assert result["type"] == "tool_result"
            messages.append(ToolMessage(texts(result["output"]), tool_call_id=result["id"]))
    limit = BENCH_CAPABILITIES.limits().effective_input_tokens

    def trim() -> object:
        return trim_messages(
            messages,
            max_tokens=limit,
            token_counter=count_tokens_approximately,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    return trim


def core_figures() -> dict[int, dict[str, float]]:
    system, tools = system_context(), tool_definitions()
    figures: dict[int, dict[str, float]] = {}
    for n in SIZES:
        items = agent_conversation(n)
        cached = with_cached_measures(items)
        # The older half was pruned by an earlier compaction attempt (realistic watermark).
        watermark = PruningWatermark(through_sequence=n // 2)
        runs = 21 if n <= 1_000 else 7

        def run(
            conversation: list[Any] = items,
            watermark: PruningWatermark = watermark,
            counter: Any = fastjson.ESTIMATE,
            remember: bool = True,
            extends: Any = None,
        ) -> Any:
            return prepare(
                system,
                conversation,
                tools,
                BENCH_CAPABILITIES,
                watermark,
                counter,
                remember=remember,
                extends=extends,
                salient=SALIENT_LINES,  # the service's memo, as every service prepare
            )

        prepared = run()
        trim = langchain_trim(system, items)
        # From scratch, as the stateless endpoint runs it: nothing remembered, nothing cached.
        # Alternating with LangChain's trim, the two medians of one series of rounds.
        t_core, t_lc = alternating_medians([lambda: run(remember=False), trim], runs)
        # The same objects again, on the first call's result (its walk carried on).
        t_again = median_seconds(lambda p=prepared: run(extends=p), runs)
        t_stdlib = median_seconds(lambda: run(counter=STDLIB_ESTIMATE, remember=False), runs)
        on_cached = run(cached)
        t_cached = median_seconds(lambda c=cached, p=on_cached: run(c, extends=p), runs)
        t_first = median_seconds(lambda c=cached: run(c), runs)
        t_cold = median_seconds(lambda c=cached: (SALIENT_LINES.clear(), run(c)), runs)
        t_json = median_seconds(lambda p=prepared: dumps(p.request), runs)
        figures[n] = {"core": t_core, "stdlib": t_stdlib, "json": t_json, "langchain": t_lc}
        p = prepared.projection
        print(
            f"{n:>6} msgs: prepare {t_core * 1e3:8.2f} ms (stdlib counter {t_stdlib * 1e3:8.2f},"
            f" same objects again {t_again * 1e3:7.2f})"
            f" | cached measures {t_cached * 1e3:7.2f} ms (first call {t_first * 1e3:7.2f},"
            f" salient memo empty {t_cold * 1e3:7.2f})"
            f" | json.dumps {t_json * 1e3:7.2f} ms (ratio {t_core / t_json:4.2f})"
            f" | LangChain trim {t_lc * 1e3:7.2f} ms (ratio {t_core / t_lc:4.2f};"
            f" stdlib counter {t_stdlib / t_lc:4.2f})"
            f" | {len(dumps(prepared.request).encode()) / 1e6:5.2f} MB,"
            f" {prepared.budget.estimated_input_tokens} tokens, pruned {p.pruned_tool_results},"
            f" truncated {p.truncated_tool_results}"
        )
    return figures


def end_to_end(sizes: tuple[int, ...] = SIZES) -> dict[tuple[str, int], tuple[float, float]]:
    """Median ``POST /v1/prepare`` time through uvicorn, next to the echo endpoint's and to
    LangChain's in-process trim of the same conversation, all alternating, with each HTTP
    client (``httpx.Client`` and ``LeanClient``): per (client, messages), the ratios to the
    echo and to LangChain."""
    system, tools = system_context(), tool_definitions()
    ratios: dict[tuple[str, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
        env = clean_env(
            CTXSVC_DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}",
            CTXSVC_MAX_BODY_BYTES=str(256 * 1024 * 1024),
            CTXSVC_JSON_LOGS="false",
            CTXSVC_LOG_LEVEL="WARNING",
            PYTHONPATH=str(REPO_ROOT),
        )
        port = free_port()
        echo = [str(PYTHON), "-m", "uvicorn", "bench.echo_app:app", "--log-level", "warning"]
        echo += ["--host", "127.0.0.1", "--port", str(port)]
        commands = [uvicorn_command(free_port()), echo]
        lean = LeanClient(timeout=600)
        with (
            running(commands, env=env, cwd=Path(tmp)) as (service, bare),
            httpx.Client(timeout=600) as full,
        ):

            def post_httpx(url: str, content: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
                response = full.post(url, content=content, headers=headers)
                return response.status_code, response.content

            clients = {"httpx": post_httpx, "http.client": lean.post}
            targets = {"service": service.url + "/v1/prepare", "echo": bare.url + "/echo"}
            try:
                for n in sizes:
                    ratios.update(_round_trips(n, system, tools, clients, targets))
            finally:
                lean.close()
    return ratios


Post = Callable[[str, bytes, dict[str, str]], tuple[int, bytes]]


def alternate(
    body: bytes,
    clients: dict[str, Post],
    targets: dict[str, str],
    trim: Callable[[], object] | None,
    runs: int,
) -> tuple[dict[tuple[str, str], list[float]], list[float], dict[str, bytes]]:
    """``body`` posted to every target with every client, then ``trim`` once, ``runs`` rounds
    after a warm-up round: each (client, target)'s times, the trim's, and each target's answer
    (which must be the same every time)."""
    headers = {"content-type": "application/json"}
    samples: dict[tuple[str, str], list[float]] = {
        (client, name): [] for client in clients for name in targets
    }
    trims: list[float] = []
    answers: dict[str, bytes] = {}
    for i in range(runs + 1):
        for client, post in clients.items():
            for name, url in targets.items():
                start = time.perf_counter()
                status, answer = post(url, body, headers)
                elapsed = time.perf_counter() - start
                if status != 200:
                    raise SystemExit(f"{name}: {status} {answer[:300]!r}")
                if answers.setdefault(name, answer) != answer:
                    raise SystemExit(f"{name} answered the same body differently")
                if i:  # the first round warms everything up
                    samples[client, name].append(elapsed)
        if trim is not None:
            start = time.perf_counter()
            trim()
            trims.append(time.perf_counter() - start)
    return samples, trims, answers


def _round_trips(
    n: int,
    system: list[SystemPart],
    tools: list[Any],
    clients: dict[str, Post],
    targets: dict[str, str],
) -> dict[tuple[str, int], tuple[float, float]]:
    items = agent_conversation(n)
    pruning = PruningWatermark(through_sequence=n // 2)
    body = dumps(prepare_body(system, items, tools, pruning=pruning)).encode()
    runs = 15 if n <= 1_000 else 3
    samples, lc_samples, _ = alternate(body, clients, targets, langchain_trim(system, items), runs)
    t_lc = statistics.median(lc_samples or [float("nan")])
    print(
        f"(d) {n:>6} msgs ({len(body) / 1e6:.2f} MB), LangChain in-process {t_lc * 1e3:.2f} ms;"
        " POST /v1/prepare through uvicorn, by client:"
    )
    ratios = {}
    for client in clients:
        t_service = statistics.median(samples[client, "service"])
        t_echo = statistics.median(samples[client, "echo"])
        ratios[client, n] = (t_service / t_echo, t_service / t_lc)
        print(
            f"      {client:<11} {t_service * 1e3:8.2f} ms | echo {t_echo * 1e3:8.2f} ms"
            f" (ratio {t_service / t_echo:4.2f}) | ÷ LangChain {t_service / t_lc:5.2f}"
        )
    return ratios


def turn_loop(start: int = 150, calls: int = 20, runs: int = 50) -> None:
    """Median per call of ``calls`` prepares of a conversation growing by 2 messages a call."""
    system, tools = system_context(), tool_definitions()
    items = with_cached_measures(agent_conversation(start + 2 * calls))

    def loop() -> None:
        earlier = None  # each call extends the previous one, as a session's context does
        for k in range(calls):
            earlier = prepare(
                system,
                items[: start + 2 * k],
                tools,
                BENCH_CAPABILITIES,
                extends=earlier,
                salient=SALIENT_LINES,
            )

    per_call = median_seconds(loop, runs) / calls
    span = f"{start} → {start + 2 * calls}"
    print(f"(e) turn loop {span} msgs: prepare {per_call * 1e6:8.1f} µs per call")


def salient_cost(n: int = 10_000, runs: int = 7) -> None:
    from app.core.pipeline import project, prune

    system, tools = system_context(), tool_definitions()
    cached = with_cached_measures(agent_conversation(n))
    watermark = PruningWatermark(through_sequence=n // 2)

    def fresh() -> list[Any]:
        # New string objects, as every read of the store gives: their hashes are not cached.
        return [replace(i, content=json.loads(dumps(i.content))) for i in cached]

    def timed(cold: bool) -> float:
        items = fresh()
        if cold:
            SALIENT_LINES.clear()
        start = time.perf_counter()
        prepare(system, items, tools, BENCH_CAPABILITIES, watermark, salient=SALIENT_LINES)
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


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISS"


def main() -> None:
    print("(a)/(b) core prepare vs one compact json.dumps and LangChain's trim_messages")
    figures = core_figures()
    at = figures[1_000]
    growth = figures[10_000]["core"] / at["core"]
    core_ratio = at["core"] / at["langchain"]
    print(f"(b) ratio to json.dumps at 1 000 messages: {at['core'] / at['json']:.2f} (target ≤ 3)")
    print(
        f"(b) ratio to LangChain trim at 1 000 messages: {core_ratio:.2f} "
        f"(target ≤ {CORE_TARGET}) {verdict(core_ratio <= CORE_TARGET)}"
    )
    print(f"(c) growth 1 000 → 10 000: {growth:.2f} (target ≤ 12) {verdict(growth <= 12)}")
    ratios = end_to_end()
    for client in ("httpx", "http.client"):
        echo, lc = ratios[client, 1_000]
        print(
            f"(d) at 1 000 messages, {client}: {echo:.2f}× the echo endpoint"
            f" (target ≤ {HTTP_ECHO_TARGET}) {verdict(echo <= HTTP_ECHO_TARGET)};"
            f" {lc:.2f}× LangChain in-process (target ≤ {HTTP_LANGCHAIN_TARGET})"
            f" {verdict(lc <= HTTP_LANGCHAIN_TARGET)}"
        )
    turn_loop()
    salient_cost()


if __name__ == "__main__":
    main()
