"""Prompt caching benchmark: a long, tool-heavy agent session against a provider that caches.

The real service runs under uvicorn (SQLite in a temporary directory) and calls a loopback fake
provider (``bench.caching_provider``: real HTTP, SSE), once as an Anthropic Messages model and
once as an OpenAI Responses model, the same session each time. For Anthropic the fake keeps a
prompt prefix cache the way Anthropic documents it (``bench.prefix_cache``: reads of the longest
written prefix ending at a breakpoint, a 20-block lookback, writes at the breakpoints, usage
reported as ``input_tokens`` / ``cache_read_input_tokens`` / ``cache_creation_input_tokens``);
for Responses the way OpenAI documents its automatic cache (the longest byte-identical prefix
an earlier request with the same ``prompt_cache_key`` sent, from 1024 tokens in increments of
128, reported as ``input_tokens_details.cached_tokens``; nothing is charged for writing).
The session (``bench.caching_session``): a system prompt over the 1024-token minimum, five
tools, tasks of ``--calls-per-task`` model calls whose tool calls the driver answers over the
HTTP API with deterministic outputs (``run_tests`` outputs are over the pruning line), in a
context window small enough that pruning triggers and one compaction happens.

It prints, for each protocol:

- the share of all input tokens read from the cache, over the session;
- the cost relative to the same session without caching (cache reads at 10 %, cache writes at
  125 %, other input at 100 %: Anthropic's prices; OpenAI's gpt-5 family also bills cached input
  at 10 % and writes nothing);
- the calls where the prefix broke: the service's ``budget.prefix_break`` (from the durable
  ``model_call_finished`` update) and the provider's view (it read less than the previous
  request's length);
- per call, how far the service's ``budget.stable_prefix_tokens`` is from the provider's
  cache-read figure: in provider tokens (the service's uncached tail, scaled by the ratio of the
  two totals, placed from the end of the request) and in messages (how many message boundaries
  lie strictly between the two points; "within one message" is at most one). Responses
  input items are not the service's messages (an answer with a tool call is two items), so
  for Responses only the tokens apart are given.

Targets: ≥ 85 % of input tokens read from the cache (each protocol); the service's figure
within one message of the provider's on every call (Anthropic).

Run: ``.venv/bin/python bench/caching.py`` (``--calls 200`` by default; ``--json PATH`` also
writes the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx

from app.storage.migrate import upgrade_to_head
from bench.caching_provider import CachingProviderServer, ProviderCall
from bench.caching_session import AGENT_TOOLS, SYSTEM_PROMPT, Driven, drive_session
from tests.servers import REPO_ROOT, ServerProcess, clean_env, free_port, uvicorn_command

KEY_ENV = "BENCH_CACHE_FAKE_KEY"  # not CTXSVC_: clean_env drops those
READ_PRICE, WRITE_PRICE = 0.10, 1.25
# Output 4000, so the trigger line is ⌈(window − 4000) × 0.85⌉ estimated tokens: at 100 000,
# 200 calls of this session prune 7 times and compact once.
DEFAULT_WINDOW = 100_000
PROTOCOLS = ("anthropic_messages", "openai_responses")


@dataclass(frozen=True)
class CallFigures:
    call: int
    total: int
    read: int
    written: int
    service_stable: int | None
    service_estimate: int | None
    prefix_break: dict[str, Any] | None
    provider_break: bool  # the provider read less than the previous request read or wrote
    tokens_apart: int | None
    messages_apart: int | None


@dataclass(frozen=True)
class Figures:
    calls: int
    turns: int
    compactions: int
    prunings: int
    input_tokens: int
    cache_read_share: float
    relative_cost: float
    service_figures: bool
    # The service's per-call usage (``model_call_finished``) equals what the provider reported.
    usage_matches: bool | None
    within_one_message: bool | None
    max_tokens_apart: int | None
    mean_tokens_apart: float | None
    max_messages_apart: int | None
    per_call: list[CallFigures]


def _service_point(call: ProviderCall, stable: int, estimate: int) -> float:
    """The service's stable prefix placed in the provider's tokens, from the request's end."""
    total = call.usage.total_tokens
    tail = max(0, estimate - stable)
    return max(0.0, total - tail * total / estimate) if estimate else 0.0


def _messages_apart(ends: tuple[int, ...], a: float, b: float) -> int:
    low, high = min(a, b), max(a, b)
    return max(0, bisect.bisect_left(ends, high) - bisect.bisect_right(ends, low))


def analyse(calls: list[ProviderCall], driven: Driven) -> Figures:
    finished = [u["payload"] for u in driven.updates if u["type"] == "model_call_finished"]
    usage_matches = None
    if len(finished) == len(calls):
        usage_matches = all(
            (f["usage"]["input_tokens"], f["usage"]["cached_tokens"])
            == (c.usage.total_tokens, c.usage.cache_read_input_tokens)
            and f["usage"].get("cache_creation_tokens") == c.usage.cache_creation_input_tokens
            for f, c in zip(finished, calls, strict=True)
        )
    compactions = sum(1 for u in driven.updates if u["type"] == "compaction_finished")
    service = len(finished) == len(calls) and all(
        "stable_prefix_tokens" in f.get("budget", {}) for f in finished
    )
    per_call: list[CallFigures] = []
    previous_cached = 0  # what the previous request read or wrote: this one could read it
    for i, call in enumerate(calls):
        usage = call.usage
        stable = estimate = apart = messages = None
        prefix_break = None
        if service:
            budget = finished[i]["budget"]
            stable, estimate = budget["stable_prefix_tokens"], budget["estimated_input_tokens"]
            prefix_break = budget.get("prefix_break")
            point = _service_point(call, stable, estimate)
            apart = round(abs(point - usage.cache_read_input_tokens))
            if usage.message_ends:  # a Responses call has none: its items are not messages
                messages = _messages_apart(usage.message_ends, point, usage.cache_read_input_tokens)
        per_call.append(
            CallFigures(
                call=call.number,
                total=usage.total_tokens,
                read=usage.cache_read_input_tokens,
                written=usage.cache_creation_input_tokens,
                service_stable=stable,
                service_estimate=estimate,
                prefix_break=prefix_break,
                provider_break=usage.cache_read_input_tokens < previous_cached,
                tokens_apart=apart,
                messages_apart=messages,
            )
        )
        previous_cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    total = sum(c.total for c in per_call)
    read = sum(c.read for c in per_call)
    written = sum(c.written for c in per_call)
    cost = READ_PRICE * read + WRITE_PRICE * written + (total - read - written)
    aparts = [c.tokens_apart for c in per_call if c.tokens_apart is not None]
    messages_apart = [c.messages_apart for c in per_call if c.messages_apart is not None]
    return Figures(
        calls=len(calls),
        turns=len(driven.turns),
        compactions=compactions,
        prunings=driven.prunings,
        input_tokens=total,
        cache_read_share=read / total if total else 0.0,
        relative_cost=cost / total if total else 1.0,
        service_figures=service,
        usage_matches=usage_matches,
        within_one_message=all(m <= 1 for m in messages_apart) if messages_apart else None,
        max_tokens_apart=max(aparts) if aparts else None,
        mean_tokens_apart=statistics.fmean(aparts) if aparts else None,
        max_messages_apart=max(messages_apart) if messages_apart else None,
        per_call=per_call,
    )


async def _register(api: httpx.AsyncClient, base_url: str, window: int, protocol: str) -> str:
    responses = protocol == "openai_responses"
    model: dict[str, Any] = {
        "context_window_tokens": window,
        "max_output_tokens": 4000,  # prompt_caching: the default, auto
        "reasoning": responses,  # as gpt-5's: the body asks for the reasoning state back
        "provider": {
            "kind": protocol,
            "base_url": base_url + "/v1" if responses else base_url,
            "model_name": "gpt-fake" if responses else "claude-fake",
            "api_key_env": KEY_ENV,
        },
    }
    response = await api.put("/v1/models/cache-bench", json=model)
    response.raise_for_status()
    # The summaries: offline and extractive, with a window for the whole Conversation.
    summary = {"context_window_tokens": 200_000, "max_output_tokens": 8000}
    response = await api.put(
        "/v1/models/cache-bench-summary", json={**summary, "provider": {"kind": "local"}}
    )
    response.raise_for_status()
    return "cache-bench"


@contextmanager
def _service(database_url: str, tmp: Path) -> Iterator[ServerProcess]:
    """``uvicorn app.main:app`` of this tree (its working directory is the repository root, so
    ``app`` is this checkout's), on an already migrated database; stopped afterwards."""
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS="true",  # the fake provider listens on loopback
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
    )
    server = ServerProcess(
        uvicorn_command(free_port()), env, cwd=REPO_ROOT, log_path=tmp / "server.log"
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def run(calls: int, calls_per_task: int, window: int, protocol: str) -> Figures:
    os.environ[KEY_ENV] = "bench-key"  # the server inherits it (not a CTXSVC_ variable)
    with tempfile.TemporaryDirectory(prefix="ctxsvc-cache-bench-") as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/bench.db"
        await upgrade_to_head(url)
        fake = CachingProviderServer(calls_per_task=calls_per_task, total_calls=calls)
        with fake, _service(url, Path(tmp)) as server:
            async with httpx.AsyncClient(base_url=server.url, timeout=120.0) as api:
                model_id = await _register(api, fake.base_url, window, protocol)
                response = await api.post(
                    "/v1/sessions",
                    json={
                        "model_id": model_id,
                        "summary_model_id": "cache-bench-summary",
                        "agent": {
                            "system_prompt": SYSTEM_PROMPT,
                            "tools": AGENT_TOOLS,
                            "preset": "coding",
                            # A compaction replays the task: the model counts anew after it.
                            "max_model_calls": 3 * calls_per_task,
                        },
                    },
                )
                response.raise_for_status()
                sid = response.json()["id"]
                driven = await drive_session(api, sid, lambda: len(fake.calls), calls)
        return analyse(fake.calls, driven)


def report(figures: Figures) -> str:
    f = figures
    lines = [
        f"{f.calls} model calls in {f.turns} turns, {f.compactions} compaction(s), "
        f"{f.prunings} pruning(s) (watermark moves), "
        f"{f.input_tokens} input tokens (provider's count)",
        f"read from cache: {f.cache_read_share:.1%} of input tokens (target ≥ 85 %)",
        f"cost relative to no caching: {f.relative_cost:.1%} "
        f"(reads at {READ_PRICE:.0%}, writes at {WRITE_PRICE:.0%})",
        "the service's per-call usage (model_call_finished) equals the provider's: "
        + {True: "yes", False: "NO", None: "not available"}[f.usage_matches],
        "prefix breaks (call: service prefix_break | provider read / request tokens):",
    ]
    for c in f.per_call:
        if c.prefix_break is not None or c.provider_break:
            said = c.prefix_break if c.prefix_break is not None else "none"
            lines.append(f"  call {c.call:3d}: {said} | read {c.read} / {c.total}")
    if f.service_figures and f.within_one_message is None:
        lines.append(
            f"stable_prefix_tokens vs cached tokens: max {f.max_tokens_apart} tokens apart, "
            f"mean {f.mean_tokens_apart:.0f} (messages apart: not measured, the provider's "
            "input items are not the service's messages)"
        )
    elif not f.service_figures:
        lines.append(
            "stable_prefix_tokens vs cache read: not available (no model_call_finished "
            "updates with budget.stable_prefix_tokens from this service)"
        )
    else:
        verdict = "yes" if f.within_one_message else "no"
        lines.append(
            f"stable_prefix_tokens vs cache read: max {f.max_tokens_apart} tokens apart, "
            f"mean {f.mean_tokens_apart:.0f}; at most {f.max_messages_apart} message(s) apart; "
            f"within one message on every call: {verdict}"
        )
        far = [c for c in f.per_call if c.messages_apart is not None and c.messages_apart > 1]
        for c in far:
            lines.append(
                f"  call {c.call:3d}: service {c.service_stable}/{c.service_estimate} "
                f"estimated, provider read {c.read}/{c.total}, {c.messages_apart} messages apart"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Figures]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--calls-per-task", type=int, default=20)
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    figures: dict[str, Figures] = {}
    for protocol in PROTOCOLS:
        figures[protocol] = asyncio.run(run(args.calls, args.calls_per_task, args.window, protocol))
        print(f"== {protocol}")
        print(report(figures[protocol]))
    shares = ", ".join(f"{p} {f.cache_read_share:.1%}" for p, f in figures.items())
    costs = ", ".join(f"{p} {f.relative_cost:.1%}" for p, f in figures.items())
    print(f"== side by side: read from cache: {shares}; cost relative to no caching: {costs}")
    if args.json is not None:
        encoded = {p: asdict(f) for p, f in figures.items()}
        args.json.write_text(json.dumps(encoded, indent=1), encoding="utf-8")
    return figures


if __name__ == "__main__":
    main()
