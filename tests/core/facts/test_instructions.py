"""How strongly a user's words bind, and which earlier instruction a later one replaces."""

from __future__ import annotations

import pytest

from app.core.facts import Strength, binding, replaced_by, revokes, strength


@pytest.mark.parametrize(
    "text",
    [
        "Never delete or modify anything in prod.",
        "This is a read-only investigation.",
        "Last time someone decided to trust the X-Forwarded-For header blindly. It blew up in "
        "production. So — let's not do that this time.",
        "We can't take the payments API down during business hours.",
        "Please don't touch the migrations.",
        "Please don\u2019t touch the migrations.",  # a typographic apostrophe
        "你别重启网关。",
        "注意：不要修改 migration。",
        "生产库只读，禁止写入。",
        "千万别重启网关。",
        "Actually — scratch that. Instead, let's use a token bucket.",
    ],
)
def test_red_lines_however_phrased(text: str) -> None:
    assert strength(text) is Strength.RED_LINE


@pytest.mark.parametrize(
    "text",
    [
        "Only look at the last hour of logs.",
        "Make sure the report names the pod.",
        "Always include the pod name in the table.",
        "Keep every query under 30 seconds.",
        "必须先跑测试。",
    ],
)
def test_softer_rules(text: str) -> None:
    assert strength(text) is Strength.RULE


@pytest.mark.parametrize(
    "text",
    [
        "Any news?",
        "ok, go on",
        "Run the tests again.",
        "继续",
        "I can't find the log.",  # "can't" binds only as "we/you/they/it can't"
        "这个方案特别好，区别不大。",  # 别 inside 特别, 区别 forbids nothing
        "只是看看。",  # 只是: "just"
    ],
)
def test_neither(text: str) -> None:
    assert strength(text) is Strength.NONE


def test_a_bare_revocation_is_a_decision_but_no_constraint_to_pin() -> None:
    assert strength("Actually — scratch that.") is Strength.RED_LINE
    assert binding("Actually — scratch that.") is Strength.NONE


def test_a_colloquial_chinese_revocation_replaces_the_instruction_it_names() -> None:
    earlier = ["用 Redis 做分布式锁，SETNX 加过期时间。", "另外把日志级别调到 INFO。", "好的"]
    assert revokes("Redis 那个方案算了…换成 advisory lock 吧")
    assert replaced_by("Redis 那个方案算了…换成 advisory lock 吧", earlier) == 0


def test_scratch_that_without_a_shared_word_replaces_the_instruction_just_before() -> None:
    earlier = ["Add rate limiting.", "Use a sliding window counter in limits.py.", "ok"]
    assert replaced_by("Actually — scratch that. Instead, let's do a token bucket.", earlier) == 1


def test_a_named_revocation_needs_a_shared_word() -> None:
    earlier = ["Restart nothing until INC-42 is closed.", "Look at the dashboards."]
    assert replaced_by("Use Postgres advisory locks instead.", earlier) is None
    assert replaced_by("The INC-42 freeze is lifted.", earlier) == 0


def test_not_a_revocation_replaces_nothing() -> None:
    assert replaced_by("Look at the worker restarts.", ["Use Redis."]) is None
    assert replaced_by("scratch that", []) is None
