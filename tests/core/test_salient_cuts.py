"""Pruning (spec §2.1) and projection (§2.2) keep the salient lines of what they cut (§9)."""

from __future__ import annotations

import math

from app.core.capabilities import ModelCapabilities
from app.core.content import Item, compact_json
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.project import (
    PROJECTION_BUDGET_BYTES,
    project_tool_results,
    truncation_marker,
)
from app.core.pipeline.prune import (
    PRUNE_HEAD_CHARS,
    PRUNE_SALIENT_CHARS,
    PRUNE_TAIL_CHARS,
    prune_marker,
    prune_tool_results,
)
from app.core.pipeline.salient import SALIENT_SHARE_PERCENT
from tests.core.factories import assistant, call, result_text, tool, user

WATERMARK = PruningWatermark(through_sequence=10)
HEADER = "[salient lines of the cut part (line number: text)]\n"


def build_log(lines: int, errors: dict[int, str]) -> str:
    """``lines`` numbered log lines (1-based), with ``errors`` replacing some of them."""
    return "\n".join(
        errors.get(n, f"2026-12-01T10:00:{n % 60:02d}Z INFO worker step {n:05d} done")
        for n in range(1, lines + 1)
    )


def pruned_text(text: str, spill: str | None = None) -> str:
    watermark = PruningWatermark(through_sequence=10, spill_directory=spill)
    [item] = prune_tool_results([tool("c1", text, seq=3)], watermark).items
    return result_text(item)


def projected_text(text: str) -> tuple[str, Item]:
    [item] = project_tool_results([tool("c1", text, seq=3)]).items
    return result_text(item), item


# ----- pruning ---------------------------------------------------------------------------------


def test_the_error_in_the_middle_of_a_40000_character_log_survives_pruning() -> None:
    log = build_log(900, {3: "error: early", 400: "src/a.py:7: error: the middle one", 899: "FAIL"})
    assert len(log) > 40_000
    text = pruned_text(log)
    omitted = len(log) - PRUNE_HEAD_CHARS - PRUNE_TAIL_CHARS
    marker = f"... [tool result pruned: {omitted} characters omitted]"
    assert text == (
        log[:PRUNE_HEAD_CHARS]
        + "\n"
        + marker
        + "\n"
        + HEADER
        + "400: src/a.py:7: error: the middle one\n"
        + "[end of salient lines]\n"
        + log[-PRUNE_TAIL_CHARS:]
    )
    # Lines that stayed visible in the head or the tail are not repeated.
    assert text.count("error: early") == 1
    assert text.count("FAIL") == 1


def test_the_spill_marker_is_unchanged_and_the_section_follows_it() -> None:
    log = build_log(400, {200: "Traceback (most recent call last):", 201: "  x", 202: "Boom: bad"})
    text = pruned_text(log, spill="/tmp/spill")
    omitted = len(log) - PRUNE_HEAD_CHARS - PRUNE_TAIL_CHARS
    marker = prune_marker(omitted, "c1", "/tmp/spill")
    assert f"\n{marker}\n{HEADER}202: Boom: bad\n[end of salient lines]\n" in text


def test_a_log_without_salient_lines_is_pruned_exactly_as_spec_2_1_says() -> None:
    log = build_log(400, {1: "error: in the head", 400: "error: in the tail"})
    text = pruned_text(log)
    omitted = len(log) - PRUNE_HEAD_CHARS - PRUNE_TAIL_CHARS
    assert text == (
        f"{log[:PRUNE_HEAD_CHARS]}\n... [tool result pruned: {omitted} characters omitted]\n"
        f"{log[-PRUNE_TAIL_CHARS:]}"
    )


def test_a_line_cut_across_the_head_boundary_counts_as_cut() -> None:
    line = "error: " + "e" * 200
    prefix = "x" * (PRUNE_HEAD_CHARS - 50) + "\n"
    log = prefix + line + "\n" + "y" * 9000
    text = pruned_text(log)
    assert f"{HEADER}2: {line}\n" in text


def test_many_errors_fill_the_share_of_the_pruning_budget_and_no_more() -> None:
    errors = {n: f"ERROR: request {n} failed with status 503" for n in range(5, 900, 3)}
    log = build_log(900, errors)
    text = pruned_text(log)
    head_and_marker = text.index(HEADER)
    section = text[head_and_marker : len(text) - PRUNE_TAIL_CHARS]
    assert len(section) <= PRUNE_SALIENT_CHARS == 1280
    assert len(section) > PRUNE_SALIENT_CHARS - 60  # filled up to the last line that fits
    listed = section.count("\n") - 2
    first = log[:PRUNE_HEAD_CHARS].count("\n") + 1  # the line cut across the head's end
    last = log[: len(log) - PRUNE_TAIL_CHARS].count("\n") + 1
    total = sum(1 for n in range(5, 900, 3) if first <= n <= last)
    assert f"[end of salient lines; {total - listed} more not shown]\n" in section
    # The first ones, in order.
    first_error = next(n for n in range(5, 900, 3) if n >= first)
    assert section.startswith(f"{HEADER}{first_error}: ERROR: request {first_error} failed")


def test_pruning_is_deterministic_and_stays_far_below_the_projection_line() -> None:
    log = build_log(2000, {n: "E" * 290 + " error" for n in range(100, 1900, 7)})
    first = pruned_text(log)
    assert pruned_text(str(log)) == first
    limit = PRUNE_HEAD_CHARS + PRUNE_TAIL_CHARS + PRUNE_SALIENT_CHARS + 200
    assert len(first) < limit
    assert len(first.encode()) * 4 < 4 * PROJECTION_BUDGET_BYTES


# ----- projection ------------------------------------------------------------------------------


def plain_projection(text: str, original_tokens: int) -> str:
    """spec §2.2 for ASCII text: 75 % head, 25 % tail of the budget less the marker."""
    marker = truncation_marker(original_tokens)
    content = PROJECTION_BUDGET_BYTES - len(marker.encode())
    head = content * 75 // 100
    return text[:head] + marker + text[len(text) - (content - head) :]


def test_the_error_in_the_middle_survives_projection_within_the_budget() -> None:
    log = build_log(3000, {1500: "panic: runtime error: invalid memory address"})
    text, item = projected_text(log)
    original = math.ceil(len(log) / 4)
    marker = truncation_marker(original)
    assert marker in text
    line = "1500: panic: runtime error: invalid memory address\n"
    section = HEADER + line + "[end of salient lines]\n"
    assert marker + section in text
    assert len(text.encode()) <= PROJECTION_BUDGET_BYTES
    # A quarter of the budget is set aside; head and tail split the rest 75/25.
    content = PROJECTION_BUDGET_BYTES - len(marker.encode())
    rest = content - content * SALIENT_SHARE_PERCENT // 100
    head = rest * 75 // 100
    assert text == log[:head] + marker + section + log[len(log) - (rest - head) :]
    block = item.content[0]
    assert block["type"] == "tool_result"
    assert block["state"] == "success"


def test_a_log_without_salient_lines_in_its_cut_part_is_projected_as_before() -> None:
    log = build_log(3000, {2: "error: head", 2999: "error: tail"})
    text, _ = projected_text(log)
    assert text == plain_projection(log, math.ceil(len(log) / 4))


def test_a_salient_line_only_in_the_margin_the_reserve_would_cut_changes_nothing() -> None:
    # Line 500 is kept by the plain cut's head but would be cut by the narrower one.
    plain = plain_projection(build_log(3000, {}), 0)
    head_lines = plain.split("\n...[tool result")[0].count("\n")
    log = build_log(3000, {head_lines - 20: "error: near the end of the plain head"})
    text, _ = projected_text(log)
    assert text == plain_projection(log, math.ceil(len(log) / 4))
    assert HEADER not in text


def test_projection_of_many_errors_fills_its_reserve_and_reports_its_tokens() -> None:
    errors = {n: f"FAILED tests/test_{n}.py::test_case - AssertionError" for n in range(1, 4000)}
    log = build_log(4000, errors)
    result = project_tool_results([tool("c1", log, seq=3)])
    text = result_text(result.items[0])
    assert len(text.encode()) <= PROJECTION_BUDGET_BYTES
    start = text.index(HEADER)
    end = text.index("more not shown]\n") + len("more not shown]\n")
    marker = truncation_marker(result.original_tokens)
    reserve = (PROJECTION_BUDGET_BYTES - len(marker.encode())) // 4
    assert reserve - 100 < end - start <= reserve
    assert result.projected_tokens == math.ceil(len(text.encode()) / 4) <= 8000


def test_multibyte_logs_are_cut_on_characters_with_their_salient_lines() -> None:
    quiet = ["日志 正常 界" * 8] * 700
    log = "\n".join([*quiet, "错误: error 支付失败", *quiet])
    text, _ = projected_text(log)
    assert "701: 错误: error 支付失败\n" in text
    assert len(text.encode()) <= PROJECTION_BUDGET_BYTES
    text.encode("utf-8")  # no half characters


# ----- through prepare ---------------------------------------------------------------------------


def test_the_budget_measures_the_salient_lines_that_are_sent() -> None:
    log = build_log(800, {400: "error: the middle one"})
    items = [
        user("run the build", seq=1),
        assistant("", call("c1", "bash"), seq=2),
        tool("c1", log, seq=3, name="bash"),
        assistant("", call("c2", "bash"), seq=4),
        tool("c2", build_log(3000, {1500: "error: projected"}), seq=5, name="bash"),
    ]
    watermark = PruningWatermark(through_sequence=3)
    prepared = prepare([], items, [], ModelCapabilities(1_000_000, 1000), watermark)
    conversation = prepared.request["messages"]
    sent = "".join(compact_json(m["content"]) for m in conversation)
    assert "400: error: the middle one" in sent
    assert "1500: error: projected" in sent
    assert prepared.budget.conversation_tokens == math.ceil(len(sent.encode()) / 4)
    assert prepared.projection.pruned_tool_results == 1
    assert prepared.projection.truncated_tool_results == 1
