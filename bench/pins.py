"""What recognizing constraints costs an append: ``proposed_constraints`` per user message,
against the estimate's measure of the same message, which every append computes anyway (the
floor of reading a message once).

    .venv/bin/python bench/pins.py [--rounds 7] [--messages 2000]

The user requests of the benchmark session (``bench/fixtures.py``: half of them hold constraint
words such as "never", "keep", "must still") and plain requests without any; each round times
both sides over all of them, alternating which goes first, in CPU time; medians of the rounds
and their ratio are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.content import text_block
from app.core.counting import ESTIMATE
from app.core.pins import proposed_constraints
from bench.fixtures import agent_conversation

_PLAIN = [
    "What does the nightly build log say about the ARM runners?",
    "Show me the slowest queries of the last hour.",
]


def _cpu(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    requests = [
        "".join(b["text"] for b in item.content if b["type"] == "text")
        for item in agent_conversation(args.messages * 8)
        if item.role == "user"
    ][: args.messages // 2]
    texts = requests + [_PLAIN[n % len(_PLAIN)] for n in range(args.messages // 2)]
    contents = [[text_block(t)] for t in texts]
    proposing = sum(1 for t in texts if proposed_constraints(t))

    def recognize() -> None:
        for text in texts:
            proposed_constraints(text)

    def measure() -> None:
        for content in contents:
            ESTIMATE.measure_message("user", content)

    recognized: list[float] = []
    measured: list[float] = []
    for round_ in range(args.rounds):
        first, second = (recognize, measure) if round_ % 2 == 0 else (measure, recognize)
        a, b = _cpu(first), _cpu(second)
        recognized.append(a if first is recognize else b)
        measured.append(b if first is recognize else a)
    per = 1e6 / len(texts)
    r, m = statistics.median(recognized) * per, statistics.median(measured) * per
    print(f"{len(texts)} user messages, {proposing} with a proposal; medians of {args.rounds}")
    print(f"  proposed_constraints      {r:8.1f} µs / message (CPU)")
    print(f"  estimate measure (floor)  {m:8.1f} µs / message (CPU)")
    print(f"  ratio                     {r / m:8.2f}×")


if __name__ == "__main__":
    main()
