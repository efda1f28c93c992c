"""Fidelity of repeated compaction (issue 14): what survives 1, 5 and 25 compactions.

Builds 33 agent sessions of three shapes (``bench/fidelity_sessions.py``: a coding agent, an
incident diagnosis, a data analysis), each with planted facts of six kinds, through the service
itself (SQLite, the offline ``local`` summary model). Each session is compacted 25 times
(manual compactions), with a new turn appended before every compaction after the first. After
rounds 1, 5 and 25 it reads the next prepared request (context inspection: the request the next
model call would send) and checks every planted fact is there verbatim. It prints:

- per fact kind, the share of planted facts present after rounds 1, 5 and 25;
- per shape, conversation tokens before and after each round (mean and max over its sessions);
- the targets: 100 % of every kind after rounds 1 and 25; after round 25 at most 1.25 × after
  round 5; every summary within the cap; at least 5× reduction for sessions over 20 000 tokens;
  a bring-your-own summary missing a section refused by validation and not installed.

Run: ``.venv/bin/python -m bench.fidelity`` (about a minute or two).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.container import Container
from app.core.capabilities import ModelCapabilities
from app.core.compaction.local import MAX_SUMMARY_BYTES
from app.core.compaction.request import SUMMARY_HEADINGS
from app.core.errors import ServiceError
from app.services.model_types import ProviderSpec
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.fidelity_sessions import FACT_KINDS, Scenario, scenarios

ROUNDS = 25
MEASURED = (1, 5, 25)
PER_SHAPE = 11
SUMMARY_CAP_TOKENS = MAX_SUMMARY_BYTES // 4


def sent_text(context: dict[str, Any]) -> str:
    """Every text of the prepared request's messages, joined (facts are looked for in it)."""
    parts: list[str] = []
    for message in context["request"]["messages"]:
        for block in message["content"]:
            if block["type"] == "text":
                parts.append(block["text"])
            elif block["type"] == "tool_result":
                parts += [b["text"] for b in block["output"] if b["type"] == "text"]
            elif block["type"] == "tool_call":
                parts.append(block["input"])
    return "\n".join(parts)


def without_section(summary: str, heading: str) -> str:
    """``summary`` with one heading and its lines removed (a bring-your-own model's mistake)."""
    lines = summary.splitlines()
    start = lines.index(heading)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines) - 1
    )
    return "\n".join(lines[:start] + lines[end:])


class Record:
    def __init__(self) -> None:
        self.present: dict[int, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
        self.tokens: dict[str, dict[int, list[tuple[int, int]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.summary_tokens: list[int] = []
        self.reductions: list[float] = []  # round 1, sessions over 20 000 tokens
        self.converged: list[float] = []  # after(25) / after(5), per session
        self.byo_refused = 0
        self.byo_total = 0
        self.missing: list[str] = []


async def run_session(container: Container, scenario: Scenario, record: Record) -> None:
    spec = {
        "model_id": "fidelity-local",
        "summary_model_id": "fidelity-local",
        "agent": {"system_prompt": "You are a careful agent.", "tools": [], "preset": "coding"},
        "sandbox": {"mode": "auto", "available": True},
    }
    sid = str((await container.sessions.create(spec))["id"])
    await container.messages.append(sid, scenario.history)
    afters: dict[int, int] = {}
    for round_ in range(1, ROUNDS + 1):
        if round_ > 1:
            turn = scenario.between(round_)
            await container.messages.append(sid, turn)
            scenario.last_request = next(m[2][0]["text"] for m in reversed(turn) if m[0] == "user")
        checkpoint = await container.compactor.compact(sid)
        before, after = (
            checkpoint["conversation_tokens_before"],
            checkpoint["conversation_tokens_after"],
        )
        record.tokens[scenario.shape][round_].append((before, after))
        record.summary_tokens.append(-(-len(checkpoint["summary"].encode()) // 4))
        afters[round_] = after
        if round_ == 1 and before > 20_000:
            record.reductions.append(before / after)
        if round_ in MEASURED:
            text = sent_text(await container.inspection.inspect(sid))
            for kind, facts in scenario.facts_now().items():
                for fact in facts:
                    found = fact in text
                    record.present[round_][kind].append(found)
                    if not found:
                        record.missing.append(f"{scenario.name} round {round_} {kind}: {fact}")
        if round_ == 1:
            await check_byo(container, sid, checkpoint["summary"], record)
    record.converged.append(afters[25] / afters[5])


async def check_byo(container: Container, sid: str, summary: str, record: Record) -> None:
    """A caller's summary missing a section is refused (422 invalid_summary), nothing stored."""
    before = len((await container.compactor.list(sid))["compactions"])
    for heading in SUMMARY_HEADINGS:
        record.byo_total += 1
        try:
            await container.compactor.compact(sid, summary=without_section(summary, heading))
        except ServiceError as exc:
            if exc.code == "invalid_summary":
                record.byo_refused += 1
    assert len((await container.compactor.list(sid))["compactions"]) == before


def report(record: Record, sessions: int, seconds: float) -> None:
    print(f"{sessions} sessions, {ROUNDS} compactions each, {seconds:.0f} s\n")
    print("Share of planted facts present verbatim in the next prepared request")
    print(f"{'fact kind':<14}" + "".join(f"{'round ' + str(r):>12}" for r in MEASURED))
    for kind in FACT_KINDS:
        shares = []
        for round_ in MEASURED:
            found = record.present[round_][kind]
            shares.append(f"{100 * sum(found) / len(found):10.1f} %")
        print(f"{kind:<14}" + "".join(f"{s:>12}" for s in shares))
    print("\nConversation tokens before → after each compaction (mean / max over the shape)")
    shown = (1, 2, 3, 5, 10, 15, 20, 25)
    for shape, rounds in record.tokens.items():
        cells = []
        for round_ in shown:
            pairs = rounds[round_]
            mean_before = statistics.mean(b for b, _ in pairs)
            mean_after = statistics.mean(a for _, a in pairs)
            most = max(a for _, a in pairs)
            cells.append(f"r{round_}: {mean_before:,.0f} → {mean_after:,.0f} (max {most:,})")
        print(f"{shape:<9}" + "; ".join(cells))
    all_present = {
        round_: all(all(v) for v in record.present[round_].values()) for round_ in MEASURED
    }
    print("\nTargets")
    print(f"- every fact after round 1: {'met' if all_present[1] else 'MISSED'}")
    print(f"- every fact after round 25: {'met' if all_present[25] else 'MISSED'}")
    worst, median = max(record.converged), statistics.median(record.converged)
    print(
        f"- after round 25 ≤ 1.25 × after round 5: worst ratio {worst:.3f} "
        f"(median {median:.3f}): {'met' if worst <= 1.25 else 'MISSED'}"
    )
    biggest = max(record.summary_tokens)
    print(
        f"- summary within the cap ({MAX_SUMMARY_BYTES} bytes ≈ {SUMMARY_CAP_TOKENS} tokens): "
        f"largest {biggest} tokens: {'met' if biggest <= SUMMARY_CAP_TOKENS else 'MISSED'}"
    )
    if record.reductions:
        least = min(record.reductions)
        print(
            f"- ≥ 5× reduction over 20 000 tokens ({len(record.reductions)} sessions): least "
            f"{least:.1f}×, median {statistics.median(record.reductions):.1f}×: "
            f"{'met' if least >= 5 else 'MISSED'}"
        )
    print(
        f"- BYO summaries missing one section refused and not installed: "
        f"{record.byo_refused}/{record.byo_total}"
    )
    for line in record.missing[:20]:
        print("  missing:", line)


async def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/fidelity.db"
        await upgrade_to_head(url)
        container = Container.build(Settings(database_url=url, migrate_on_start=False))
        try:
            await container.models.put(
                "fidelity-local", ModelCapabilities(400_000, 16_384), ProviderSpec(kind="local")
            )
            record = Record()
            sessions = scenarios(PER_SHAPE)
            for scenario in sessions:
                await run_session(container, scenario, record)
        finally:
            await container.aclose()
    report(record, len(sessions), time.perf_counter() - started)


if __name__ == "__main__":
    asyncio.run(main())
