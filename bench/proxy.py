"""Drop-in endpoint benchmark: what going through the service costs, and what its caching buys.

The real service runs under uvicorn (SQLite in a temporary directory) in front of the loopback
fake Anthropic Messages provider with a prompt prefix cache (``bench.caching_provider``); the
client speaks Anthropic Messages to ``POST /v1/compat/anthropic/v1/messages`` (the proxied
call) or straight to the fake (the direct call), over one keep-alive ``httpx`` client each.

1. **Overhead.** A conversation of ``N`` messages (100 and 1 000), each round one more
   question: the direct call and the proxied call of the same history, in alternating order
   (A/B, B/A, ...), streamed and not. Printed: the median wall time of each, the ratio of the
   medians (the floor is the direct call, 1.0), the median per-round difference, and the
   service's CPU time per proxied call (``/proc/<pid>/stat``, all the service's threads:
   matching, storing, preparing, encoding, the provider call, rendering, and the answer's write
   after the response: the service's CPU over all measured rounds ÷ rounds; beside it the part
   spent while the call was open). The proxied session is created in an unmeasured first
   round; each measured round continues it. ``--floor`` adds a third call to the rotation: the
   same body through a bare pass-through (``bench/passthrough_app.py``: decode, re-encode,
   forward, the answer's bytes back), the floor of any proxy that reads and rewrites the body.
2. **Caching.** A tool-heavy session of ``--calls`` model calls (tasks of ``--calls-per-task``
   calls, tool outputs of ``bench.caching_session``) driven by a client that resends its whole
   history, through the proxy and, beside it, straight to the provider: once with the breakpoint
   the provider's documentation suggests (the system prompt and the last block of the request)
   and once with none. Printed: the share of all input tokens read from the cache, the input
   cost relative to no caching (reads at 10 %, writes at 125 %), and that cost against the
   direct session with the breakpoint (the floor, 1.0). The proxy also prunes
   old tool results and compacts at the model's line, which changes the prefix.

Run: ``.venv/bin/python bench/proxy.py`` (``--rounds 30 --calls 200``; ``--json PATH`` also
writes the figures; ``--messages 100 1000`` the histories measured; ``--overhead-only`` skips
part 2). Old beside new: run it from two work trees in turn, alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import anyio
import httpx

from app.storage.migrate import upgrade_to_head
from bench.caching_provider import TASK_MARK, CachingProviderServer
from bench.caching_session import AGENT_TOOLS, SYSTEM_PROMPT, tool_output
from tests.servers import REPO_ROOT, ServerProcess, clean_env, free_port, uvicorn_command

KEY_ENV = "BENCH_PROXY_FAKE_KEY"  # not CTXSVC_: clean_env drops those
READ_PRICE, WRITE_PRICE = 0.10, 1.25
MODEL = "proxy-bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Overhead:
    messages: int
    streamed: bool
    rounds: int
    direct_ms: float
    proxied_ms: float
    ratio: float
    difference_ms: float
    # The service's CPU over the measured rounds ÷ rounds (all of it: what it does after a
    # response is sent counted too), and the part spent while the call was open.
    service_cpu_ms_per_call: float
    service_cpu_in_call_ms: float
    # With ``--floor``: the pass-through (``bench/passthrough_app.py``), the same figures.
    passthrough_ms: float | None = None
    passthrough_ratio: float | None = None
    passthrough_cpu_ms_per_call: float | None = None


@dataclass(frozen=True)
class Caching:
    route: str
    calls: int
    input_tokens: int
    cache_read_share: float
    relative_cost: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextmanager
def service(database_url: str, tmp: Path) -> Iterator[ServerProcess]:
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        CTXSVC_PROXY_SUMMARY_MODEL="local",
    )
    server = ServerProcess(uvicorn_command(free_port()), env, cwd=REPO_ROOT, log_path=tmp / "log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def register(server: ServerProcess, provider_url: str, window: int) -> None:
    model = {
        "context_window_tokens": window,
        "max_output_tokens": 4000,
        "provider": {
            "kind": "anthropic_messages",
            "base_url": provider_url,
            "model_name": "claude-fake",
            "api_key_env": KEY_ENV,
        },
    }
    httpx.put(f"{server.url}/v1/models/{MODEL}", json=model, timeout=60).raise_for_status()


def answer_of(response: httpx.Response, streamed: bool) -> list[dict[str, Any]]:
    """The answer's content blocks, from a whole message or its events."""
    if not streamed:
        return list(response.json()["content"])
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for line in response.text.splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta, index = event["delta"], event["index"]
            if delta["type"] == "text_delta":
                blocks[index]["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[index] = partial.get(index, "") + delta["partial_json"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    return [blocks[i] for i in sorted(blocks)]


def history_of(messages: int) -> list[dict[str, Any]]:
    """``messages`` alternating user / assistant texts, ending with a user question."""
    out: list[dict[str, Any]] = []
    for number in range(messages):
        role = "user" if number % 2 == 0 else "assistant"
        text = f"Message {number}: " + "the service keeps the context of long agent runs. " * 3
        out.append({"role": role, "content": text})
    if out[-1]["role"] != "user":
        out.append({"role": "user", "content": "And then?"})
    return out


@contextmanager
def passthrough(provider_url: str, tmp: Path) -> Iterator[ServerProcess]:
    env = clean_env(BENCH_PASSTHROUGH_PROVIDER=provider_url)
    command = uvicorn_command(free_port())
    command[command.index("app.main:app")] = "bench.passthrough_app:app"
    server = ServerProcess(command, env, cwd=REPO_ROOT, log_path=tmp / "passthrough.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def overhead(
    server: ServerProcess,
    fake: CachingProviderServer,
    messages: int,
    streamed: bool,
    rounds: int,
    floor: ServerProcess | None = None,
) -> Overhead:
    history = history_of(messages)
    pid = server.process.pid if server.process is not None else 0
    floor_pid = floor.process.pid if floor is not None and floor.process is not None else 0
    direct_times: list[float] = []
    proxied_times: list[float] = []
    floor_times: list[float] = []
    cpu: list[float] = []
    floor_cpu: list[float] = []
    sides = ["direct", "proxied", *(["passthrough"] if floor is not None else [])]
    with (
        httpx.Client(base_url=fake.base_url, timeout=120) as direct,
        httpx.Client(base_url=server.url, timeout=120) as proxied,
        httpx.Client(base_url=floor.url if floor else fake.base_url, timeout=120) as through,
    ):

        def call(client: httpx.Client, path: str, model: str) -> tuple[float, httpx.Response]:
            body = {
                "model": model,
                "max_tokens": 500,
                "system": SYSTEM_PROMPT,
                "messages": history,
                "stream": streamed,
            }
            started = time.perf_counter()
            response = client.post(path, json=body)
            response.read()
            elapsed = time.perf_counter() - started
            response.raise_for_status()
            return elapsed, response

        for number in range(rounds + 1):  # round 0 creates the session: not measured
            if number == 1:
                time.sleep(0.2)  # round 0's answer written
                service_started = cpu_seconds(pid)
            # Which goes first turns each round (A/B, B/A; with the floor A/B/C, B/C/A, ...).
            shift = number % len(sides)
            order = sides[shift:] + sides[:shift]
            answer: httpx.Response | None = None
            for side in order:
                if side == "passthrough":
                    before = cpu_seconds(floor_pid)
                    elapsed, _ = call(through, "/v1/messages", "claude-fake")
                    if number:
                        floor_times.append(elapsed)
                        floor_cpu.append(cpu_seconds(floor_pid) - before)
                elif side == "direct":
                    elapsed, _ = call(direct, "/v1/messages", "claude-fake")
                    if number:
                        direct_times.append(elapsed)
                else:
                    before = cpu_seconds(pid)
                    elapsed, answer = call(proxied, "/v1/compat/anthropic/v1/messages", MODEL)
                    if number:
                        proxied_times.append(elapsed)
                        cpu.append(cpu_seconds(pid) - before)
            assert answer is not None
            history = [
                *history,
                {"role": "assistant", "content": answer_of(answer, streamed)},
                {"role": "user", "content": f"Next question {number}?"},
            ]
        # Everything the service spent over the measured rounds, the answers it wrote after
        # their responses included (idle during the other calls).
        time.sleep(0.2)
        service_total = cpu_seconds(pid) - service_started
    pairs = [p - d for p, d in zip(proxied_times, direct_times, strict=True)]
    direct_median, proxied_median = (
        statistics.median(direct_times),
        statistics.median(proxied_times),
    )
    return Overhead(
        messages=messages,
        streamed=streamed,
        rounds=rounds,
        direct_ms=direct_median * 1000,
        proxied_ms=proxied_median * 1000,
        ratio=proxied_median / direct_median,
        difference_ms=statistics.median(pairs) * 1000,
        service_cpu_ms_per_call=service_total / rounds * 1000,
        service_cpu_in_call_ms=statistics.fmean(cpu) * 1000,
        passthrough_ms=statistics.median(floor_times) * 1000 if floor_times else None,
        passthrough_ratio=statistics.median(floor_times) / direct_median if floor_times else None,
        passthrough_cpu_ms_per_call=statistics.fmean(floor_cpu) * 1000 if floor_cpu else None,
    )


def drive(client: httpx.Client, path: str, model: str, calls: int, marked: bool) -> None:
    """The tool-heavy session: each tool call answered, each answered task followed by the
    next, the whole history resent every call."""
    history: list[dict[str, Any]] = [{"role": "user", "content": f"{TASK_MARK}1] Fix the bug."}]
    system: Any = SYSTEM_PROMPT
    if marked:
        system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    task = 1
    for _ in range(calls):
        messages = history
        if marked:  # the documented incremental breakpoint: the request's last block
            last = history[-1]
            blocks = last["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            blocks = [*blocks[:-1], {**blocks[-1], "cache_control": {"type": "ephemeral"}}]
            messages = [*history[:-1], {**last, "content": blocks}]
        body = {
            "model": model,
            "max_tokens": 4000,
            "system": system,
            "tools": AGENT_TOOLS,
            "messages": messages,
        }
        response = client.post(path, json=body)
        response.raise_for_status()
        content = response.json()["content"]
        history.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if uses:
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": b["id"],
                    "content": tool_output(b["name"], b["id"]),
                }
                for b in uses
            ]
            history.append({"role": "user", "content": results})
        else:
            task += 1
            history.append({"role": "user", "content": f"{TASK_MARK}{task}] Next change."})


def caching_figures(route: str, fake: CachingProviderServer) -> Caching:
    usages = [call.usage for call in fake.calls]
    read = sum(u.cache_read_input_tokens for u in usages)
    written = sum(u.cache_creation_input_tokens for u in usages)
    total = read + written + sum(u.input_tokens for u in usages)
    cost = read * READ_PRICE + written * WRITE_PRICE + (total - read - written)
    return Caching(route, len(usages), total, read / total, cost / total)


def caching(tmp: Path, calls: int, calls_per_task: int, window: int) -> list[Caching]:
    out: list[Caching] = []
    for route in ("proxied", "direct, breakpoint on the last block", "direct, no breakpoint"):
        fake = CachingProviderServer(calls_per_task=calls_per_task, total_calls=calls)
        with fake:
            if route == "proxied":
                url = f"sqlite+aiosqlite:///{tmp}/caching.db"
                anyio.run(upgrade_to_head, url)
                with service(url, tmp) as server:
                    register(server, fake.base_url, window)
                    with httpx.Client(base_url=server.url, timeout=300) as client:
                        drive(client, "/v1/compat/anthropic/v1/messages", MODEL, calls, False)
            else:
                with httpx.Client(base_url=fake.base_url, timeout=300) as client:
                    drive(client, "/v1/messages", "claude-fake", calls, "breakpoint on" in route)
            out.append(caching_figures(route, fake))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--calls-per-task", type=int, default=8)
    parser.add_argument("--window", type=int, default=100_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--messages", type=int, nargs="+", default=[100, 1000], help="the histories measured"
    )
    parser.add_argument("--overhead-only", action="store_true", help="skip the caching part")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure the pass-through floor (bench/passthrough_app.py) in the rotation",
    )
    args = parser.parse_args()
    os.environ[KEY_ENV] = "bench-key"  # the server inherits it (not a CTXSVC_ variable)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ctxsvc-proxy-bench-") as name:
        tmp = Path(name)
        url = f"sqlite+aiosqlite:///{tmp}/overhead.db"
        anyio.run(upgrade_to_head, url)
        rows: list[Overhead] = []
        fake = CachingProviderServer(calls_per_task=1, total_calls=10**9)  # always a text answer
        with ExitStack() as stack:
            stack.enter_context(fake)
            server = stack.enter_context(service(url, tmp))
            through = stack.enter_context(passthrough(fake.base_url, tmp)) if args.floor else None
            register(server, fake.base_url, 1_000_000)
            print("overhead (floor: the direct call = 1.0)")
            for messages in args.messages:
                for streamed in (False, True):
                    row = overhead(server, fake, messages, streamed, args.rounds, through)
                    rows.append(row)
                    print(
                        f"  {messages:>5} messages {'streamed' if streamed else 'whole   '}: "
                        f"direct {row.direct_ms:7.1f} ms, proxied {row.proxied_ms:7.1f} ms, "
                        f"ratio {row.ratio:5.2f}, +{row.difference_ms:6.1f} ms per call, "
                        f"service CPU {row.service_cpu_ms_per_call:6.1f} ms per call "
                        f"({row.service_cpu_in_call_ms:.1f} while it was open)"
                    )
                    if row.passthrough_ms is not None:
                        print(
                            f"{'':>26}pass-through {row.passthrough_ms:7.1f} ms, "
                            f"ratio {row.passthrough_ratio:5.2f}, its CPU "
                            f"{row.passthrough_cpu_ms_per_call:6.1f} ms per call"
                        )
        results["overhead"] = [asdict(r) for r in rows]
        if args.overhead_only:
            if args.json is not None:
                args.json.write_text(json.dumps(results, indent=2) + "\n")
            return
        print(f"caching ({args.calls} calls, tasks of {args.calls_per_task})")
        figures = caching(tmp, args.calls, args.calls_per_task, args.window)
        floor = figures[1]  # the direct session with the documented breakpoint
        for share in figures:
            cost = share.relative_cost * share.input_tokens
            print(
                f"  {share.route:<38}: {share.cache_read_share:6.1%} of {share.input_tokens} "
                f"input tokens read from the cache, cost {share.relative_cost:5.1%} of uncached "
                f"= {cost:,.0f} token-equivalents, "
                f"{cost / (floor.relative_cost * floor.input_tokens):4.2f}x the direct session's"
            )
        results["caching"] = [asdict(r) for r in figures]
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
