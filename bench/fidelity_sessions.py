"""Agent sessions with planted facts for ``bench/fidelity.py`` (deterministic per seed).

Three shapes of long sessions (spec §9):

- ``coding``: a coding agent fixing a failing test — source reads, pytest runs whose failure sits
  in the middle of a long log, edits with ``file_change`` artifacts, a plan;
- ``incident``: an incident diagnosis in the manner of the Keel chapter's INC-42 story — twenty
  rounds of "is it recovered?", a read-only constraint stated in round 3, the earlier incident's
  id in round 6, long logs with the one error in their middle, repeated "any news?";
- ``data``: data analysis with long query results (CSV) and a timed-out query.

Each session plants facts of six kinds (the issue-29 shapes of ``bench/fidelity_trust.py`` add
the latest decision, ownership and the latest metric value), each an exact string that must
appear verbatim in the next prepared request: user constraints, ticket/incident ids, exact
error messages, edited paths, pending plan steps, and the last user request (which changes
every round). ``between``
gives the new turn appended before each compaction: plausible follow-ups that plant nothing new.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FACT_KINDS", "Message", "Scenario", "scenarios"]

Message = tuple[str, str, list[dict[str, Any]]]
FACT_KINDS = (
    "constraint",
    "identifier",
    "error",
    "path",
    "pending",
    "last_request",
    "decision",
    "ownership",
    "metric",
)


@dataclass
class Scenario:
    name: str
    shape: str
    history: list[Message]
    facts: dict[str, list[str]]
    between: Callable[[int], list[Message]]
    calls: int = 0
    last_request: str = ""
    stale: list[str] = field(default_factory=list)  # replaced: never shown unmarked
    forged: list[str] = field(default_factory=list)  # never in a summary (pasted, not ours)

    def facts_now(self) -> dict[str, list[str]]:
        return {**self.facts, "last_request": [self.last_request]}


@dataclass
class _Builder:
    rng: random.Random
    messages: list[Message] = field(default_factory=list)
    calls: int = 0
    last_request: str = ""

    def user(self, text: str) -> None:
        self.messages.append(("user", "normal", [{"type": "text", "text": text}]))
        self.last_request = text

    def say(self, text: str) -> None:
        self.messages.append(("assistant", "normal", [{"type": "text", "text": text}]))

    def tool(
        self,
        name: str,
        arguments: dict[str, Any],
        output: str,
        *,
        state: str = "success",
        edited: str | None = None,
        note: str = "",
    ) -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        content: list[dict[str, Any]] = [{"type": "text", "text": note}] if note else []
        content.append(
            {"type": "tool_call", "id": call_id, "name": name, "input": json.dumps(arguments)}
        )
        self.messages.append(("assistant", "normal", content))
        result: dict[str, Any] = {
            "type": "tool_result",
            "id": call_id,
            "name": name,
            "output": [{"type": "text", "text": output}],
            "state": state,
        }
        if edited is not None:
            result["artifacts"] = [{"kind": "file_change", "payload": {"path": edited}}]
        self.messages.append(("tool", "normal", [result]))

    def plan(self, steps: list[tuple[str, str]]) -> None:
        plan = {"plan": [{"step": step, "status": status} for step, status in steps]}
        self.tool("update_plan", plan, "Plan updated")

    def log(self, lines: int, error: str | None = None, prefix: str = "worker") -> str:
        rng = self.rng
        out = [
            f"2026-12-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z INFO {prefix}-{rng.randint(1, 9)} "
            f"handled request {rng.randint(10_000, 99_999)} in {rng.randint(3, 90)} ms"
            for n in range(lines)
        ]
        if error is not None:
            out[lines // 2] = error
        return "\n".join(out)


def _code(rng: random.Random, functions: int) -> str:
    return "\n\n".join(
        f"def refund_{n}(amount: Decimal, rate: Decimal) -> Decimal:\n"
        f'    """Refund step {n}: {rng.choice(["prorate", "round", "cap", "audit"])}."""\n'
        f"    value = (amount * rate).quantize(Decimal('0.01'))\n"
        f"    return max(value, Decimal('0'))"
        for n in range(functions)
    )


def coding(seed: int) -> Scenario:
    rng = random.Random(seed)
    b = _Builder(rng)
    ticket, other = f"PAY-{1000 + seed}", f"QA-{200 + seed}"
    constraint = "Do not change the public API of the refunds module."
    constraint2 = "Keep the code compatible with Python 3.9; no match statements."
    error = (
        f"FAILED tests/test_refund.py::test_half_cent_{seed} - AssertionError: "
        f"assert Decimal('4.99') == Decimal('5.00')"
    )
    error2 = f"ModuleNotFoundError: No module named 'billing_legacy_{seed}'"
    paths = [f"src/billing/refund_{seed}.py", f"tests/test_refund_{seed}.py"]
    pending = [f"fix the rounding in refund_{seed}", f"add a regression test for {ticket}"]
    b.user(f"Fix the refund rounding bug {ticket}: refunds of 4.995 are rounded down.")
    b.say("I will reproduce it first.")
    b.plan(
        [
            ("reproduce the failure", "completed"),
            (pending[0], "in_progress"),
            (pending[1], "pending"),
        ]
    )
    b.tool("read", {"path": paths[0]}, _code(rng, 30 + seed % 20))
    b.user(constraint)
    b.tool("bash", {"command": "pytest -q"}, b.log(300 + 40 * (seed % 5), error, "pytest"))
    b.say("One test fails on the half-cent case.")
    b.user(
        "Some context: "
        + "the finance team reconciles refunds every night and flagged a few cents. " * 12
        + constraint2
        + " They also mentioned the ledger export, which is unrelated. " * 6
    )
    b.tool("bash", {"command": "python -m billing.check"}, error2, state="error")
    b.tool("edit", {"path": paths[0]}, "edited", edited=paths[0])
    b.tool("edit", {"path": paths[1]}, "edited", edited=paths[1])
    b.user(f"Also keep {other} in mind: the same rounding is used by exports.")
    b.say("Edited both files; re-running the suite.")
    facts = {
        "constraint": [constraint, constraint2],
        "identifier": [ticket, other],
        "error": [error, error2],
        "path": paths,
        "pending": pending,
    }

    def between(round_: int) -> list[Message]:
        t = _Builder(rng, calls=b.calls + 1000 * round_)
        t.user(rng.choice(["Run the tests again.", "continue", "What is left to do?", "ok, go on"]))
        passed = rng.randint(40, 60)
        t.tool("bash", {"command": "pytest -q"}, t.log(60, f"{passed} passed in 3.2s", "pytest"))
        t.say(f"The suite passes: {passed} tests. Still working on the plan.")
        return t.messages

    return Scenario(f"coding-{seed}", "coding", b.messages, facts, between, b.calls, b.last_request)


def incident(seed: int) -> Scenario:
    rng = random.Random(seed)
    b = _Builder(rng)
    inc = f"INC-{40 + seed}"
    run = f"RUN-{seed + 7}"
    constraint = (
        "This is a read-only investigation: do not restart services or write to any database."
    )
    constraint2 = "Only report numbers you have read from a log or a dashboard."
    error = f"ERROR payments-api: upstream ledger timed out after 30s (trace 7f3a{seed:02d})"
    error2 = "psycopg.OperationalError: connection to server at 10.0.3.7 port 5432 failed"
    note = f"notes/{inc}-timeline.md"
    pending = [f"compare the ledger latency with {inc}", "tell the user whether it recovered"]
    questions = [
        "Is the payment service recovered, and is it related to the last incident?",
        "Check the error rate of payments-api.",
        constraint,
        "Any news?",
        "Look at the worker restarts.",
        f"The last incident was {inc}; the ledger timed out then too. Compare with it.",
        f"Also look at the runbook run {run}.",
        constraint2,
    ]
    for round_ in range(20):
        b.user(
            questions[round_]
            if round_ < len(questions)
            else rng.choice(["any news?", "Any news?", "status?"])
        )
        if round_ == 1:
            b.plan(
                [
                    ("read the payments-api logs", "completed"),
                    (pending[0], "in_progress"),
                    (pending[1], "pending"),
                ]
            )
        if round_ in (2, 9):
            b.tool(
                "bash",
                {"command": "kubectl logs payments-api"},
                b.log(500 + 50 * (seed % 4), error, "payments"),
            )
        elif round_ == 7:
            b.tool("bash", {"command": "psql -c 'select 1'"}, error2, state="error")
        elif round_ == 11:
            b.tool("write", {"path": note}, "written", edited=note)
        else:
            b.tool("bash", {"command": "curl -s status"}, b.log(40, None, "status"))
        rate = rng.choice(["0.1", "0.2", "0.1"])
        b.say(f"Round {round_ + 1}: error rate {rate} %, orders still failing.")
    facts = {
        "constraint": [constraint, constraint2],
        "identifier": [inc, run],
        "error": [error, error2],
        "path": [note],
        "pending": pending,
    }

    def between(round_: int) -> list[Message]:
        t = _Builder(rng, calls=b.calls + 1000 * round_)
        t.user(rng.choice(["any news?", "Any news?", "Is it recovered now?", "status?"]))
        t.tool(
            "bash", {"command": "kubectl logs payments-api --tail 50"}, t.log(50, None, "payments")
        )
        t.say("No change: error rate 0.1 %, orders still failing.")
        return t.messages

    return Scenario(
        f"incident-{seed}", "incident", b.messages, facts, between, b.calls, b.last_request
    )


def _csv(rng: random.Random, rows: int) -> str:
    header = "day,region,orders,revenue_eur,refunds_eur"
    lines = [
        f"2026-03-{1 + n % 28:02d},{rng.choice(['eu-west', 'eu-north', 'us-east'])},"
        f"{rng.randint(100, 900)},{rng.randint(10_000, 90_000)}.{rng.randint(0, 99):02d},"
        f"{rng.randint(0, 900)}.{rng.randint(0, 99):02d}"
        for n in range(rows)
    ]
    return "\n".join([header, *lines])


def data(seed: int) -> Scenario:
    rng = random.Random(seed)
    b = _Builder(rng)
    ticket = f"DATA-{300 + seed}"
    constraint = "Only query the read replica; never run DDL or writes."
    constraint2 = "Keep every query under 30 seconds."
    error = "psycopg.errors.QueryCanceled: canceling statement due to statement timeout"
    error2 = f'ERROR: column "refund_eur_{seed}" does not exist'
    paths = ["analysis/march_revenue.sql", f"reports/{ticket}.md"]
    pending = ["split the March revenue by region", f"write the findings to reports/{ticket}.md"]
    b.user(f"Find out why revenue dropped in March ({ticket}).")
    b.user(constraint)
    b.plan(
        [("load March orders", "completed"), (pending[0], "in_progress"), (pending[1], "pending")]
    )
    b.tool(
        "sql",
        {"query": "select * from orders_daily where month = 3"},
        _csv(rng, 800 + 100 * (seed % 6)),
    )
    b.tool("sql", {"query": "select * from orders_hourly"}, error, state="error")
    b.user(constraint2)
    b.tool("sql", {"query": "select refund_eur from refunds"}, error2, state="error")
    b.tool("sql", {"query": "select * from refunds_daily where month = 3"}, _csv(rng, 1200))
    b.tool("edit", {"path": paths[0]}, "saved", edited=paths[0])
    b.tool("edit", {"path": paths[1]}, "saved", edited=paths[1])
    b.say("Revenue in eu-north fell by 12 %; refunds doubled in the second week.")
    facts = {
        "constraint": [constraint, constraint2],
        "identifier": [ticket],
        "error": [error, error2],
        "path": paths,
        "pending": pending,
    }

    def between(round_: int) -> list[Message]:
        t = _Builder(rng, calls=b.calls + 1000 * round_)
        week = rng.randint(1, 4)
        t.user(f"Run the weekly breakdown for week {week}.")
        t.tool("sql", {"query": f"select * from weekly where week = {week}"}, _csv(rng, 120))
        t.say(f"Week {week}: revenue within 2 % of February.")
        return t.messages

    return Scenario(f"data-{seed}", "data", b.messages, facts, between, b.calls, b.last_request)


def scenarios(per_shape: int) -> list[Scenario]:
    return [make(seed) for seed in range(per_shape) for make in (coding, incident, data)]
