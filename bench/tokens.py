"""Token-counting throughput of every counter over a realistic agent conversation.

    .venv/bin/python bench/tokens.py [--seconds 1.0]

Prints, per counter, the one-off load time and the throughput of ``measure_message`` over the
whole corpus (tokens/s and MB/s of message text), best of several timed passes in this one run.
The corpus is an agent session: user requests in several scripts, assistant thinking and tool
calls, and tool results holding the repository's own source files (real code, deterministic).

The second section times the core ``prepare`` of a 10 000-message agent session
(``bench/fixtures.py``) per counter: every message measured from scratch, against the figures
stored at append time (``with_cached_measures``) — median of several runs, ratio printed (target
with ``o200k_base``: cached at least 10× faster). Results that the prepare rewrites (pruned,
truncated) are measured again as they are sent; the "service" column adds the memo the service's
container puts around exact counters (``MemoizedCounter``), which remembers those figures.

Sections are listed in ``SECTIONS``; each is a function of the shared corpus that prints its own
table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from app.core.content import Block, Item, Role, text_block  # noqa: E402
from app.core.counting import TokenCounter, utf8_len  # noqa: E402
from app.core.pipeline.prepare import prepare  # noqa: E402
from app.providers.tokenizers import COUNTER_NAMES, get_counter  # noqa: E402
from app.services.tokens import MemoizedCounter  # noqa: E402
from bench.fixtures import (  # noqa: E402
    BENCH_CAPABILITIES,
    agent_conversation,
    system_context,
    tool_definitions,
    with_cached_measures,
)

_REQUESTS = [
    "Please read the settings module and explain how the database URL is validated.",
    "Refactor the prune stage so it never mutates its input; keep the tests green.",
    "请检查一下预算计算是否正确，并解释为什么会触发压缩。",
    "設定ファイルを読んで、トークン数の上限がどこで決まるか教えてください。",
    "Peux-tu vérifier que les blocs « artifacts » ne sont jamais comptés ? 🙏",
    "Run the failing test again and show me the traceback 🔥🚀",
]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: list[Block]


def _source_files() -> list[Path]:
    return sorted(p for p in (REPO / "app").rglob("*.py") if p.stat().st_size > 0)


def build_corpus() -> list[Message]:
    """One long session: a request, then read-file turns over the repository's sources."""
    messages: list[Message] = []
    for index, path in enumerate(_source_files()):
        rel = path.relative_to(REPO).as_posix()
        call_id = f"call_{index}"
        if index % 5 == 0:
            messages.append(Message("user", [text_block(_REQUESTS[index // 5 % len(_REQUESTS)])]))
        messages.append(
            Message(
                "assistant",
                [
                    {"type": "thinking", "thinking": f"I should look at {rel} before answering."},
                    text_block(f"Reading `{rel}`."),
                    {
                        "type": "tool_call",
                        "id": call_id,
                        "name": "read_file",
                        "input": json.dumps({"path": rel, "start": 1, "limit": 400}),
                    },
                ],
            )
        )
        messages.append(
            Message(
                "tool",
                [
                    {
                        "type": "tool_result",
                        "id": call_id,
                        "name": "read_file",
                        "output": [text_block(path.read_text(encoding="utf-8"))],
                        "state": "success",
                    }
                ],
            )
        )
    return messages


def _text_bytes(messages: list[Message]) -> int:
    total = 0
    for message in messages:
        for block in message.content:
            if block["type"] == "text":
                total += utf8_len(block["text"])
            elif block["type"] == "thinking":
                total += utf8_len(block["thinking"])
            elif block["type"] == "tool_call":
                total += utf8_len(block["name"]) + utf8_len(block["input"])
            elif block["type"] == "tool_result":
                total += sum(utf8_len(o["text"]) for o in block["output"] if o["type"] == "text")
    return total


def _best_pass(counter: TokenCounter, messages: list[Message], seconds: float) -> float:
    best = float("inf")
    deadline = time.perf_counter() + seconds
    passes = 0
    while passes < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        for message in messages:
            counter.measure_message(message.role, message.content)
        best = min(best, time.perf_counter() - start)
        passes += 1
    return best


def bench_counters(messages: list[Message], seconds: float) -> None:
    megabytes = _text_bytes(messages) / 1e6
    print(f"## counters — {len(messages)} messages, {megabytes:.2f} MB of text")
    print(f"{'counter':<24}{'load s':>9}{'tokens':>11}{'pass ms':>10}{'tokens/s':>14}{'MB/s':>9}")
    for name in COUNTER_NAMES:
        start = time.perf_counter()
        counter = get_counter(name)
        load = time.perf_counter() - start
        measure = sum(counter.measure_message(m.role, m.content) for m in messages)
        tokens = counter.tokens(measure)
        best = _best_pass(counter, messages, seconds)
        print(
            f"{name:<24}{load:>9.3f}{tokens:>11,}{best * 1e3:>10.1f}"
            f"{tokens / best:>14,.0f}{megabytes / best:>9.1f}"
        )


PREPARE_MESSAGES = 10_000


def _median_prepare(items: list[Item], counter: TokenCounter, runs: int) -> float:
    system, tools = system_context(), tool_definitions()
    prepare(system, items, tools, BENCH_CAPABILITIES, counter=counter)  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        prepare(system, items, tools, BENCH_CAPABILITIES, counter=counter)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_cached_prepare(_: list[Message], seconds: float) -> None:
    """Core ``prepare`` of a long session: per-message figures stored at append (spec §3.4)
    against measuring every message again, as a prepare without the cache would."""
    items = agent_conversation(PREPARE_MESSAGES)
    system, tools = system_context(), tool_definitions()
    print(f"## cached prepare — {PREPARE_MESSAGES:,} messages (bench/fixtures.agent_conversation)")
    print(
        f"{'counter':<24}{'tokens':>11}{'scratch ms':>12}{'cached ms':>11}{'ratio':>8}"
        f"{'service ms':>12}{'ratio':>8}"
    )
    for name in COUNTER_NAMES:
        counter = get_counter(name)
        cached = with_cached_measures(items, counter)
        budget = prepare(system, cached, tools, BENCH_CAPABILITIES, counter=counter).budget
        scratch = _median_prepare(items, counter, runs=3)
        runs = max(5, min(50, int(seconds / max(scratch / 10, 1e-3))))
        fast = _median_prepare(cached, counter, runs=runs)
        # As the service's container configures it: exact counters memoize the figures of the
        # results a prepare rewrites (pruned, truncated); the first run fills the memo.
        service_counter = counter if name == "estimate" else MemoizedCounter(counter)
        service = _median_prepare(cached, service_counter, runs=runs)
        print(
            f"{name:<24}{budget.estimated_input_tokens:>11,}{scratch * 1e3:>12.1f}"
            f"{fast * 1e3:>11.1f}{scratch / fast:>7.1f}×{service * 1e3:>12.1f}"
            f"{scratch / service:>7.1f}×"
        )


SECTIONS: list[tuple[str, Callable[[list[Message], float], None]]] = [
    ("counters", bench_counters),
    ("cached prepare", bench_cached_prepare),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="token counting throughput")
    parser.add_argument("--seconds", type=float, default=1.0, help="timing budget per row")
    args = parser.parse_args(argv)
    messages = build_corpus()
    for _title, section in SECTIONS:
        section(messages, args.seconds)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
