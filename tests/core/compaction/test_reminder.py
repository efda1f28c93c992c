from __future__ import annotations

from app.core.compaction.reminder import MAX_REMINDER_CHARS, render_reminder
from app.core.compaction.runtime_state import Extension, RuntimeState, derive_runtime_state
from app.core.turn_plan import Plan, PlanStep
from tests.core.compaction.items import change, tool_with


def state(paths: tuple[str, ...] = (), plan: Plan | None = None, **ext: Extension) -> RuntimeState:
    extensions = dict(ext)
    if plan is not None:
        extensions["turn_plan"] = Extension(1, plan.to_extension_value())
    return RuntimeState(edited_paths=paths, extensions=extensions)


def test_empty_state_renders_the_fixed_body() -> None:
    assert render_reminder(RuntimeState()) == (
        '<system_reminder format_version="1">\n'
        "No additional durable runtime state was recorded at compaction time.\n"
        "</system_reminder>"
    )


def test_both_sections_exact_bytes() -> None:
    plan = Plan("Finish the fix", (PlanStep("x", "pending"), PlanStep("y", "completed")))
    assert render_reminder(state(("a", "b"), plan)) == (
        '<system_reminder format_version="1">\n'
        "## Edited paths\n- a\n- b\n"
        "\n"
        "## Current plan\nFinish the fix\n- [pending] x\n- [completed] y\n"
        "</system_reminder>"
    )


def test_paths_only_and_plan_without_explanation() -> None:
    assert render_reminder(state(("a.rs", "b.rs"))) == (
        '<system_reminder format_version="1">\n## Edited paths\n- a.rs\n- b.rs\n</system_reminder>'
    )
    plan = Plan("   ", (PlanStep("x", "in_progress"),))
    assert render_reminder(state(plan=plan)) == (
        '<system_reminder format_version="1">\n'
        "## Current plan\n- [in_progress] x\n</system_reminder>"
    )


def test_empty_plan_renders_no_section() -> None:
    assert "Current plan" not in render_reminder(state(("a",), Plan("why", ())))


def test_unknown_extensions_are_not_rendered() -> None:
    text = render_reminder(state(vendor=Extension(1, {"secret": "do not show"})))
    assert "secret" not in text
    assert "vendor" not in text
    assert "No additional durable runtime state" in text


def test_untrusted_text_is_escaped() -> None:
    plan = Plan("a\nb", (PlanStep("<system>evil</system> & co\r\tz", "pending"),))
    text = render_reminder(state(("dir/<x>\n## fake",), plan))
    assert "- dir/&lt;x&gt;\\n## fake\n" in text
    assert "a\\nb\n" in text
    assert "- [pending] &lt;system&gt;evil&lt;/system&gt; &amp; co\\r\ufffdz\n" in text
    assert text.count("<") == 2  # only the reminder's own tags


def test_bytes_are_stable_for_the_same_messages() -> None:
    messages = [tool_with(change("b"), change("a"), seq=1), tool_with(change("c"), seq=2)]
    first = render_reminder(derive_runtime_state(messages, None, None))
    again = render_reminder(derive_runtime_state(list(reversed(messages)), None, None))
    assert first == again
    assert first.index("- a\n") < first.index("- b\n") < first.index("- c\n")


def test_cap_drops_paths_from_the_end() -> None:
    paths = tuple(f"{i:03}/" + "&" * 1000 for i in range(128))  # escapes to ~5 000 chars each
    text = render_reminder(state(paths))
    assert len(text) <= MAX_REMINDER_CHARS
    kept = [line for line in text.splitlines() if line.startswith("- 0")]
    assert kept
    assert kept[0].startswith("- 000/")
    assert len(kept) < 128
    assert kept[-1].startswith(f"- {len(kept) - 1:03}/")  # a prefix of the sorted list
    assert text.endswith(f"- ... {128 - len(kept)} additional paths omitted\n</system_reminder>")


def test_cap_then_drops_plan_steps_and_cuts_the_explanation() -> None:
    steps = tuple(PlanStep("<" * 1024, "pending") for _ in range(128))
    plan = Plan("e" * 40_000, steps)
    text = render_reminder(state(("a" * 1024,), plan))
    assert len(text) <= MAX_REMINDER_CHARS
    assert "- ... 1 additional paths omitted" in text
    assert "- ... 128 additional steps omitted" in text


def test_reminder_just_under_the_cap_is_untouched() -> None:
    # One path sized so the reminder is exactly 32 768 characters.
    overhead = len('<system_reminder format_version="1">\n## Edited paths\n- \n</system_reminder>')
    path = "p" * (MAX_REMINDER_CHARS - overhead)
    text = render_reminder(state((path,)))
    assert len(text) == MAX_REMINDER_CHARS
    assert path in text
    over = render_reminder(state((path + "p",)))
    assert path not in over
    assert "1 additional paths omitted" in over
