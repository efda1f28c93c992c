"""Fidelity of repeated compaction (spec §9; docs/compaction.md): what survives 1, 5, 25 and 100
compactions.

Builds 36 agent sessions, fresh every run, of twelve shapes — a coding agent, an incident
diagnosis, a data analysis (``bench/fidelity_sessions.py``) and the issue-29 shapes
(``bench/fidelity_trust.py``: paraphrased and negative-example red lines, decision overrides,
colloquial revocations in English and Chinese, ownership splits, a FATAL line after 29
retries, a changing metric, a Chinese session, everyday rules pressing on the cap, a pasted
summary and reminder that must not be adopted) — each with
planted facts, through the service itself (SQLite, the offline ``local`` summary model). Each
session is compacted 100 times (manual compactions), with a new turn appended before every
compaction after the first. After rounds 1, 5, 25 and 100 it reads the next prepared request
(context inspection: the request the next model call would send) and checks every planted fact
is there verbatim, and that no replaced instruction is there unmarked. It prints:

- per fact kind, the share of planted facts present after each measured round, and the share
  of replaced instructions never shown unmarked;
- the forged lines found in a summary or a reminder as their own (target 0);
- per shape, conversation tokens before and after each round (mean and max over its sessions);
- the targets: 100 % of every kind at every measured round; after round 100 at most 1.25 ×
  after round 5; every summary within the cap (``MAX_SUMMARY_BYTES``); at least 5× reduction
  for sessions over 20 000 tokens; a bring-your-own summary missing a section refused by
  validation and not installed.

Run: ``.venv/bin/python -m bench.fidelity`` (about a minute); ``--per-shape N`` and
``--rounds N`` make it smaller (the measured rounds past ``N`` are skipped);
``--without-forged`` leaves the forged shape out.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.render.prepare import inspection_json
from app.api.schemas.sessions import SessionCreate
from app.container import Container
from app.core.capabilities import ModelCapabilities
from app.core.compaction.local import MAX_SUMMARY_BYTES
from app.core.compaction.request import SUMMARY_HEADINGS
from app.core.errors import ServiceError
from app.services.model_types import ProviderSpec
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.fidelity_sessions import FACT_KINDS, Scenario, coding, data, incident
from bench.fidelity_trust import FORGED_SHAPES, REPLACED_MARK, TRUST_SHAPES

ROUNDS = 100
MEASURED = (1, 5, 25, 100)
PER_SHAPE = 3
Shape = Callable[[int], Scenario]
SHAPES: tuple[Shape, ...] = (coding, incident, data, *TRUST_SHAPES, *FORGED_SHAPES)
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
        self.converged: list[float] = []  # after(last) / after(5), per session
        self.unmarked: dict[int, list[bool]] = defaultdict(list)  # replaced, shown as current
        self.adopted: list[str] = []  # forged lines found in a summary or a reminder
        self.forged_planted = 0
        self.byo_refused = 0
        self.byo_total = 0
        self.missing: list[str] = []


async def run_session(
    container: Container, scenario: Scenario, record: Record, rounds: int
) -> None:
    spec = {
        "model_id": "fidelity-local",
        "summary_model_id": "fidelity-local",
        "agent": {"system_prompt": "You are a careful agent.", "tools": [], "preset": "coding"},
        "sandbox": {"mode": "auto", "available": True},
    }
    sid = (await container.sessions.create(SessionCreate.model_validate(spec), "default")).id
    record.forged_planted += len(scenario.forged)
    await container.messages.append(sid, scenario.history)
    afters: dict[int, int] = {}
    for round_ in range(1, rounds + 1):
        if round_ > 1:
            turn = scenario.between(round_)
            await container.messages.append(sid, turn)
            scenario.last_request = next(m[2][0]["text"] for m in reversed(turn) if m[0] == "user")
        # Measured at every count, also when a round adds less than its summary grows.
        checkpoint = await container.compactor.compact(sid, allow_larger=True)
        before, after = (
            checkpoint.conversation_tokens_before,
            checkpoint.conversation_tokens_after,
        )
        record.tokens[scenario.shape][round_].append((before, after))
        record.summary_tokens.append(-(-len(checkpoint.summary.encode()) // 4))
        ours = checkpoint.summary + "\n" + checkpoint.runtime_reminder
        record.adopted += [
            f"{scenario.name} r{round_}: {f.strip()}" for f in scenario.forged if f in ours
        ]
        afters[round_] = after
        if round_ == 1 and before > 20_000:
            record.reductions.append(before / after)
        if round_ in MEASURED:
            inspection = await container.inspection.inspection(sid)
            text = sent_text(inspection_json(inspection, encode_as=None))
            for kind, facts in scenario.facts_now().items():
                for fact in facts:
                    found = fact in text
                    record.present[round_][kind].append(found)
                    if not found:
                        record.missing.append(f"{scenario.name} round {round_} {kind}: {fact}")
            for old in scenario.stale:
                unmarked = text.count(old) > text.count(REPLACED_MARK + old)
                record.unmarked[round_].append(unmarked)
                if unmarked:
                    record.missing.append(f"{scenario.name} round {round_} unmarked: {old}")
        if round_ == 1:
            await check_byo(container, sid, checkpoint.summary, record)
    if rounds > 5:
        record.converged.append(afters[rounds] / afters[5])


async def check_byo(container: Container, sid: str, summary: str, record: Record) -> None:
    """A caller's summary missing a section is refused (422 invalid_summary), nothing stored."""
    before = len((await container.compactor.list(sid)).compactions)
    for heading in SUMMARY_HEADINGS:
        record.byo_total += 1
        try:
            await container.compactor.compact(sid, summary=without_section(summary, heading))
        except ServiceError as exc:
            if exc.code == "invalid_summary":
                record.byo_refused += 1
    assert len((await container.compactor.list(sid)).compactions) == before


def _share(values: list[bool]) -> str:
    return f"{100 * sum(values) / len(values):10.1f} %" if values else f"{'—':>12}"


def report(record: Record, sessions: int, rounds: int, seconds: float) -> None:
    measured = [r for r in MEASURED if r <= rounds]
    print(f"{sessions} sessions, {rounds} compactions each, {seconds:.0f} s\n")
    print("Share of planted facts present verbatim in the next prepared request")
    print(f"{'fact kind (planted)':<24}" + "".join(f"{'round ' + str(r):>12}" for r in measured))
    for kind in FACT_KINDS:
        shares = [_share(record.present[r][kind]) for r in measured]
        label = f"{kind} ({len(record.present[1][kind])})"
        print(f"{label:<24}" + "".join(shares))
    marked = [_share([not u for u in record.unmarked[r]]) for r in measured]
    print(f"{f'replaced marked ({len(record.unmarked[1])})':<24}" + "".join(marked))
    print("\nConversation tokens before → after each compaction (mean / max over the shape)")
    shown = [r for r in (1, 2, 5, 10, 25, 50, 100) if r <= rounds]
    for shape, by_round in record.tokens.items():
        cells = []
        for round_ in shown:
            pairs = by_round[round_]
            mean_before = statistics.mean(b for b, _ in pairs)
            mean_after = statistics.mean(a for _, a in pairs)
            most = max(a for _, a in pairs)
            cells.append(f"r{round_}: {mean_before:,.0f} → {mean_after:,.0f} (max {most:,})")
        print(f"{shape:<11}" + "; ".join(cells))
    print("\nTargets")
    for round_ in measured:
        kept = all(all(v) for v in record.present[round_].values())
        kept = kept and not any(record.unmarked[round_])
        print(f"- every fact after round {round_}, no replaced one unmarked: {_met(kept)}")
    if record.forged_planted:
        print(
            f"- 0 forged lines adopted as the summary's or reminder's own "
            f"({record.forged_planted} planted): found {len(record.adopted)} times over the "
            f"rounds: {_met(not record.adopted)}"
        )
    if record.converged:
        worst, median = max(record.converged), statistics.median(record.converged)
        print(
            f"- after round {rounds} ≤ 1.25 × after round 5: worst ratio {worst:.3f} "
            f"(median {median:.3f}): {_met(worst <= 1.25)}"
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
    for line in record.adopted[:10]:
        print("  adopted:", line)


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


async def run(per_shape: int, rounds: int, shapes: Sequence[Shape] = SHAPES) -> Record:
    """``per_shape`` fresh sessions of every shape, each compacted ``rounds`` times."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/fidelity.db"
        await upgrade_to_head(url)
        container = Container.build(Settings(database_url=url, migrate_on_start=False))
        try:
            await container.models.put(
                "default",
                "fidelity-local",
                ModelCapabilities(400_000, 16_384),
                ProviderSpec(kind="local"),
            )
            record = Record()
            for scenario in [make(seed) for seed in range(per_shape) for make in shapes]:
                await run_session(container, scenario, record, rounds)
        finally:
            await container.aclose()
    return record


def main(argv: list[str] | None = None) -> Record:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--per-shape", type=int, default=PER_SHAPE)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--without-forged", action="store_true", help="leave the forged shape out")
    args = parser.parse_args(argv)
    shapes = [s for s in SHAPES if not (args.without_forged and s in FORGED_SHAPES)]
    started = time.perf_counter()
    record = asyncio.run(run(args.per_shape, args.rounds, shapes))
    sessions = args.per_shape * len(shapes)
    report(record, sessions, args.rounds, time.perf_counter() - started)
    return record


if __name__ == "__main__":
    main()
