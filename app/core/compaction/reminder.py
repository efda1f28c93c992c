"""Rendering of the runtime-state reminder (spec §7.5).

The reminder is the third synthetic item after a compaction: what the model must not forget
even if the summary omits it (files it changed, its checklist). Every line is escaped as World
State text (spec §4), so a path or a step can never forge a tag or a line break.

Size cap (decision): the whole reminder is at most 32 768 characters. When it would be longer,
paths are dropped from the end of the sorted list first and replaced by one line
``- ... {n} additional paths omitted``; if the reminder is still too long with no path left,
plan steps are dropped from the end the same way (``- ... {n} additional steps omitted``); as a
last resort the plan explanation is cut. Rendering is a pure function of the state, so the same
state always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.core.compaction.runtime_state import RuntimeState, turn_plan_of
from app.core.turn_plan import PlanStep
from app.core.world_state.escape import escape_text

__all__ = [
    "EMPTY_REMINDER_BODY",
    "MAX_REMINDER_CHARS",
    "REMINDER_CLOSE",
    "REMINDER_OPEN",
    "render_reminder",
]

REMINDER_OPEN = '<system_reminder format_version="1">'
REMINDER_CLOSE = "</system_reminder>"
EMPTY_REMINDER_BODY = "No additional durable runtime state was recorded at compaction time."
MAX_REMINDER_CHARS = 32_768


def render_reminder(state: RuntimeState) -> str:
    """The reminder text for ``state``, at most ``MAX_REMINDER_CHARS`` characters."""
    plan = turn_plan_of(state)
    paths = list(state.edited_paths)
    steps = list(plan.steps) if plan is not None else []
    explanation = plan.explanation if plan is not None else None

    def with_paths(n: int) -> str:
        return _render(paths[:n], len(paths) - n, explanation, steps, 0)

    def with_steps(n: int) -> str:
        return _render([], len(paths), explanation, steps[:n], len(steps) - n)

    def with_explanation(n: int) -> str:
        return _render([], len(paths), (explanation or "")[:n], [], len(steps))

    for render, total in (
        (with_paths, len(paths)),
        (with_steps, len(steps)),
        (with_explanation, len(explanation or "")),
    ):
        fitting = _largest_fitting(render, total)
        if fitting is not None:
            return fitting
    raise AssertionError("an empty reminder always fits")  # pragma: no cover


def _largest_fitting(render: Callable[[int], str], total: int) -> str | None:
    """``render(n)`` for the largest ``n`` in ``0..total`` that fits; length grows with ``n``."""
    text = render(total)
    if len(text) <= MAX_REMINDER_CHARS:
        return text
    low, high = 0, total - 1
    best: str | None = None
    while low <= high:
        mid = (low + high) // 2
        candidate = render(mid)
        if len(candidate) <= MAX_REMINDER_CHARS:
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    return best


def _render(
    paths: Sequence[str],
    omitted_paths: int,
    explanation: str | None,
    steps: Sequence[PlanStep],
    omitted_steps: int,
) -> str:
    sections: list[str] = []
    path_lines = [f"- {p}" for p in paths]
    if omitted_paths:
        path_lines.append(f"- ... {omitted_paths} additional paths omitted")
    if path_lines:
        sections.append(_section("Edited paths", path_lines))
    # An empty plan (``plan: []``) renders no section, even with an explanation.
    if steps or omitted_steps:
        plan_lines = [explanation.strip()] if explanation and explanation.strip() else []
        plan_lines.extend(f"- [{s.status}] {s.step}" for s in steps)
        if omitted_steps:
            plan_lines.append(f"- ... {omitted_steps} additional steps omitted")
        sections.append(_section("Current plan", plan_lines))
    body = "\n".join(sections) if sections else f"{EMPTY_REMINDER_BODY}\n"
    return f"{REMINDER_OPEN}\n{body}{REMINDER_CLOSE}"


def _section(title: str, lines: Sequence[str]) -> str:
    rendered = "".join(f"{escape_text(line.rstrip())}\n" for line in lines)
    return f"## {escape_text(title.strip())}\n{rendered}"
