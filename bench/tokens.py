"""Token-counting throughput of every counter over a realistic agent conversation.

    .venv/bin/python bench/tokens.py [--seconds 1.0]

Prints, per counter, the one-off load time and the throughput of ``measure_message`` over the
whole corpus (tokens/s and MB/s of message text), best of several timed passes in this one run.
The corpus is an agent session: user requests in several scripts, assistant thinking and tool
calls, and tool results holding the repository's own source files (real code, deterministic).

Sections are listed in ``SECTIONS``; each is a function of the shared corpus that prints its own
table, so another (e.g. a cached-prepare comparison) is one more entry.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.core.content import Block, Role, text_block
from app.core.counting import TokenCounter, utf8_len
from app.providers.tokenizers import COUNTER_NAMES, get_counter

REPO = Path(__file__).resolve().parents[1]

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


SECTIONS: list[tuple[str, Callable[[list[Message], float], None]]] = [
    ("counters", bench_counters),
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
