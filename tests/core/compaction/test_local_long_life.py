"""The ``local`` summarizer over a long life (spec §9): every distinct
user request and constraint is kept, repeats collapse, and repeated compaction stays under the
fixed cap instead of copying the previous summary."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.compaction.checkpoint import (
    Checkpoint,
    compacted_projection,
    select_last_user_request,
)
from app.core.compaction.local import (
    MAX_FILLER_REQUESTS,
    MAX_REQUEST_CHARS,
    MAX_SUMMARY_BYTES,
    local_summary,
)
from app.core.compaction.reminder import render_reminder
from app.core.compaction.request import summary_request_conversation
from app.core.compaction.runtime_state import derive_runtime_state
from app.core.compaction.validation import validate_summary
from app.core.content import Item
from app.core.turn_plan import Plan, parse_update_plan_arguments
from tests.core.compaction.items import change, tool_with
from tests.core.factories import assistant, call, user

READ_ONLY = "This is a read-only investigation: do not restart or write anything."
REMINDER = '<system_reminder format_version="1">\nx\n</system_reminder>'
INC_NOTE = "INC-42 looks related: last time the ledger timed out under the same load."


class Session:
    """Stored messages, and the active Conversation after each compaction (as the service)."""

    def __init__(self) -> None:
        self.stored: list[Item] = []
        self.checkpoint: Checkpoint | None = None
        self.plan: Plan | None = None

    def add(self, *items: Item) -> None:
        for item in items:
            seq = len(self.stored) + 1
            self.stored.append(
                Item(item.role, item.kind, item.content, type(item.origin)(f"m{seq}", seq))
            )

    def active(self) -> list[Item]:
        if self.checkpoint is None:
            return list(self.stored)
        boundary = self.checkpoint.replaced_through_message_sequence
        tail = [i for i in self.stored if (i.sequence or 0) > boundary]
        return compacted_projection(self.checkpoint, tail)

    def compact(self) -> str:
        active = self.active()
        summary = local_summary(summary_request_conversation(active))
        assert validate_summary(summary, finish_reason="stop", has_tool_calls=False) == summary
        state = derive_runtime_state(self.stored, None, self.plan)
        through = len(self.stored)
        self.checkpoint = Checkpoint(
            f"c{through}",
            through,
            "manual",
            summary,
            render_reminder(state),
            select_last_user_request(active),
            through,
            through,
        )
        return summary


def section(summary: str, number: int) -> str:
    return summary.split(f"## {number}. ")[1].split("\n## ")[0] + "\n"


def test_a_constraint_from_round_3_and_what_was_said_of_inc_42_survive_every_compaction() -> None:
    session = Session()
    requests = [
        "Is the payment service recovered, and is it related to the last incident?",
        "Check the error rate of payments-api.",
        READ_ONLY,
        "Any news?",
        "Look at the worker restarts.",
        INC_NOTE,
    ]
    for round_ in range(1, 21):
        text = requests[round_ - 1] if round_ <= len(requests) else "any news?"
        session.add(user(text), assistant(f"Round {round_}: error rate still 0.1 %."))
        if round_ % 2 == 0:
            summary = session.compact()
            if round_ >= 6:
                assert f"- {INC_NOTE}\n" in section(summary, 6)
            if round_ >= 4:
                assert f"- {READ_ONLY}\n" in section(summary, 6)
                assert "- First user request: Is the payment service recovered" in summary
    assert "INC-42" in section(summary, 2)
    # "Any news?" and the 14 "any news?" are one line with their count.
    assert "- (×15) Any news?\n" in section(summary, 6)
    assert section(summary, 6).count("news") == 1


def test_a_long_message_is_shortened_around_its_constraint_sentences() -> None:
    filler = "We looked at many graphs and the dashboards were mostly green. " * 30
    message = filler + "Never deploy on Fridays. " + filler + "Keep the API stable."
    summary = local_summary(summary_request_conversation([user("first"), user(message)]))
    [entry] = [line for line in section(summary, 6).splitlines() if "Fridays" in line]
    assert "Never deploy on Fridays." in entry
    assert "Keep the API stable." in entry
    assert "…" in entry
    assert len(entry) <= MAX_REQUEST_CHARS + 40


def test_filler_goes_first_constraints_and_requests_with_facts_stay() -> None:
    session = Session()
    session.add(user("Fix the refund rounding bug (PAY-1234)."))
    session.add(user("Only touch src/billing/refund.py."))
    for n in range(20):
        session.add(user(f"ok, thanks, carry on with step {n}"), assistant("Working on it."))
        session.compact()
    summary = session.compact()
    messages = section(summary, 6)
    assert "- Fix the refund rounding bug (PAY-1234).\n" in messages
    assert "- Only touch src/billing/refund.py.\n" in messages
    fillers = [line for line in messages.splitlines() if "carry on" in line]
    assert len(fillers) == MAX_FILLER_REQUESTS
    assert "step 19" in fillers[-1]  # the newest are the ones kept


def test_the_cap_is_reached_and_held_across_30_compactions() -> None:
    """Every round brings new distinct material of every kind; the summary grows to the cap and
    stays there, while the first round's constraint, identifier, error and path stay."""
    session = Session()
    plan = {"plan": [{"step": "find the root cause of PAY-1", "status": "in_progress"}]}
    session.add(
        user("Investigate PAY-1. Never write to the production database."),
        assistant("", call("p1", "update_plan", json.dumps(plan)), call("b1", "bash")),
        tool_with(seq=None, text="Plan updated", name="update_plan"),
        tool_with(
            change("src/first.py"),
            text="FAILED tests/test_first.py::test_one - AssertionError: 1 != 2",
            name="bash",
        ),
    )
    session.plan = parse_update_plan_arguments(json.dumps(plan))
    sizes = []
    detail = "the checkout latency doubled after the deploy of the payments gateway; " * 4
    for round_ in range(1, 31):
        session.add(
            user(f"Round {round_}: look at ticket OPS-{round_}: {detail}"),
            assistant(
                " ".join(f"Step {k} of the reasoning about OPS-{round_}." for k in range(30)),
                call(f"e{round_}", "edit"),
            ),
            tool_with(
                change(f"src/module_{round_}.py"),
                state="error",
                text=f"Traceback (most recent call last):\n  x\nKeyError: 'key_{round_}' " * 3,
            ),
        )
        summary = session.compact()
        sizes.append(len(summary.encode()))
        assert sizes[-1] <= MAX_SUMMARY_BYTES
        assert "Never write to the production database." in summary
        assert "PAY-1" in section(summary, 2)
        assert "Earlier summary" not in summary
        assert summary.count("src/module_1.py\n") <= 1
        # Paths the summary had to drop are in the reminder the next request carries.
        next_request = "".join(b["text"] for i in session.active() for b in i.content)
        assert "src/first.py" in next_request
        assert f"src/module_{round_}.py" in next_request
    assert max(sizes) > MAX_SUMMARY_BYTES * 0.9  # the cap was reached ...
    assert min(sizes[-10:]) > MAX_SUMMARY_BYTES * 0.9  # ... and held
    # The newest of each kind is there; the oldest made room for them.
    assert "KeyError: 'key_30'" in summary
    assert "OPS-30" in summary
    assert "- [in_progress] find the root cause of PAY-1\n" in section(summary, 7)


def summary_after(earlier: str, request: Item, *tail: Item) -> str:
    """The local summary of a conversation compacted into ``earlier`` (replaying ``request``)."""
    checkpoint = Checkpoint(
        "c1", 1, "manual", earlier, REMINDER, select_last_user_request([request]), 1, 1
    )
    return local_summary(summary_request_conversation(compacted_projection(checkpoint, tail)))


def test_a_summary_from_another_model_is_merged_entry_by_entry() -> None:
    byo = (
        '<conversation_summary format_version="1">\n'
        "## 1. Primary Request and Intent\nThe user wants the flaky test in CI fixed.\n"
        "## 2. Key Technical Concepts\nRetry budgets; the ABC-9 ticket.\n"
        "## 3. Files and Code Sections\nci/retry.yml was changed.\n"
        "## 4. Errors and Fixes\nTimeoutError in test_sync, not yet fixed.\n"
        "## 5. Problem Solving and Decisions\nDecided to raise the timeout.\n"
        "## 6. User Messages and Constraints\nDo not disable the test.\n"
        "## 7. Pending Tasks\nRun the suite 10 times.\n"
        "## 8. Current Work\nEditing ci/retry.yml.\n"
        "## 9. Next Safe Action\nRe-run CI.\n"
        "</conversation_summary>"
    )
    summary = summary_after(
        byo, user("Fix the flaky test (ABC-9).", mid="m1", seq=1), user("any progress?", seq=2)
    )
    for kept in (
        "The user wants the flaky test in CI fixed.",
        "Retry budgets; the ABC-9 ticket.",
        "ci/retry.yml was changed.",
        "- TimeoutError in test_sync, not yet fixed.\n",
        "Decided to raise the timeout.",
        "- Do not disable the test.\n",
        "- Run the suite 10 times.\n",
    ):
        assert summary.count(kept) == 1, kept
    assert "Editing ci/retry.yml." not in summary  # current work is stale by now


def test_a_summary_of_the_earlier_format_is_read_without_its_prefixes() -> None:
    old = (
        '<conversation_summary format_version="1">\n## 1. Primary Request and Intent\n'
        "- Latest user request: fix it\n- Earlier summary: Earlier summary: First user request "
        "here: start\n## 2. Key Technical Concepts\n- Identifiers mentioned: XY-1, XY-2\n"
        "## 3. Files and Code Sections\n- Earlier summary: Edited: a.py\n- Edited: a.py\n"
        "## 4. Errors and Fixes\nNone\n## 5. Problem Solving and Decisions\n- Source: 3 user "
        "request(s)\n## 6. User Messages and Constraints\n- (8 earlier user messages omitted)\n"
        "- fix it\n## 7. Pending Tasks\nNone\n## 8. Current Work\nNone\n## 9. Next Safe Action\n"
        "- x\n</conversation_summary>"
    )
    summary = summary_after(old, user("fix it", mid="m1", seq=1))
    assert "- First user request: start\n" in summary
    assert "- Identifiers: XY-1, XY-2\n" in summary
    assert summary.count("a.py") == 1
    assert "Source:" not in summary
    assert "omitted" not in summary
    assert "Earlier summary" not in summary


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.text(alphabet="abcXY-12 .\n<>#é界", max_size=900), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_any_rounds_give_valid_summaries_under_the_cap(rounds: list[list[str]]) -> None:
    session = Session()
    for texts in rounds:
        for text in texts:
            session.add(user(text or "x"), assistant(text * 3))
        summary = session.compact()
        assert len(summary.encode()) <= MAX_SUMMARY_BYTES
