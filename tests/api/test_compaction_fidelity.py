"""What the offline ``local`` summary keeps over HTTP (spec §9): red lines
however they are phrased, the latest word marked as replacing the earlier one, red lines before
everyday rules under the cap, the most severe log line, the latest metric value, and Chinese
sentences and identifiers — on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assistant, assistant_calls, new_session, tool_result, user
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

REPLACED = "[replaced by a later request] "
XFF = (
    "Last time someone decided to trust the X-Forwarded-For header blindly. It blew up in "
    "production. So — let's not do that this time."
)
READ_ONLY = "This is a read-only investigation: never delete or modify anything in prod."


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url)):
        yield client


async def session_with(api: httpx.AsyncClient, *messages: dict[str, Any]) -> str:
    sid = await new_session(api)
    response = await append(api, sid, *messages)
    assert response.status_code == 201, response.text
    return sid


async def compact(api: httpx.AsyncClient, sid: str) -> str:
    response = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert response.status_code == 201, response.text
    return str(response.json()["summary"])


async def next_request_text(api: httpx.AsyncClient, sid: str) -> str:
    response = await api.get(f"/v1/sessions/{sid}/context")
    assert response.status_code == 200, response.text
    return "\n".join(
        block["text"]
        for message in response.json()["request"]["messages"]
        for block in message["content"]
        if block["type"] == "text"
    )


async def follow_up(api: httpx.AsyncClient, sid: str, request: str, reply: str) -> str:
    """One more round (a request and its answer), then a compaction; the new summary."""
    response = await append(api, sid, user(request), assistant(reply))
    assert response.status_code == 201, response.text
    return await compact(api, sid)


def section(summary: str, number: int) -> list[str]:
    body = summary.split(f"## {number}. ")[1].split("\n## ")[0]
    return [line.removeprefix("- ") for line in body.splitlines()[1:]]


async def test_a_paraphrased_red_line_survives_every_compaction(api: httpx.AsyncClient) -> None:
    sid = await session_with(
        api,
        user("Add rate limiting to the login endpoint in api/login.py."),
        assistant("I will look at the middleware first."),
        user(XFF),
        assistant("Understood."),
    )
    summary = await compact(api, sid)
    for round_ in range(1, 10):
        assert XFF in section(summary, 6), summary
        request = f"ok, carry on with file {round_} of the middleware"  # filler, not a rule
        summary = await follow_up(api, sid, request, f"Round {round_}: still working.")
    assert XFF in section(summary, 6)
    assert XFF in await next_request_text(api, sid)


async def test_a_colloquial_chinese_revocation_marks_what_it_replaced(
    api: httpx.AsyncClient,
) -> None:
    redis = "用 Redis 做分布式锁，SETNX 加 30 秒过期时间。"
    revocation = "Redis 那个方案算了…换成 advisory lock 吧"
    sid = await session_with(
        api,
        user("给订单服务加一个防重复扣款的锁。"),
        assistant("好的，我先看一下代码。"),
        user(redis),
        assistant("好的，用 Redis。"),
    )
    await compact(api, sid)  # the instruction is carried by an earlier summary
    summary = await follow_up(api, sid, revocation, "明白，改用 advisory lock。")
    for round_ in range(5):
        messages = section(summary, 6)
        assert revocation in messages
        assert REPLACED + redis in messages
        assert redis not in messages  # never left alone as if it were current
        summary = await follow_up(api, sid, "继续", f"第 {round_} 轮：还在改。")


async def test_scratch_that_survives_and_the_plan_it_replaced_is_marked(
    api: httpx.AsyncClient,
) -> None:
    window = "Use a sliding window counter per client IP in middleware/limits.py."
    decision = "Actually — scratch that. Instead, let's use a token bucket per account."
    sid = await session_with(
        api,
        user("Add rate limiting to the login endpoint."),
        assistant("Looking."),
        user(window),
        assistant("OK."),
        user(decision),
        assistant("Switching to a token bucket."),
    )
    summary = await compact(api, sid)
    for round_ in range(8):  # "lost after two more compactions" before
        summary = await follow_up(api, sid, "ok, go on", f"Round {round_}: implementing.")
        messages = section(summary, 6)
        assert decision in messages
        assert REPLACED + window in messages
        assert window not in messages


async def test_the_read_only_red_line_outlasts_everyday_rules_under_the_cap(
    api: httpx.AsyncClient,
) -> None:
    sid = await session_with(
        api,
        user("Is the payments service healthy? Check INC-42."),
        assistant("Looking."),
        user(READ_ONLY),
        assistant("Understood: read only."),
    )
    detail = "compare the p95 with the dashboard panel and the previous deploy window; " * 3
    summary = await compact(api, sid)
    for round_ in range(1, 50):
        request = (
            f"Only look at the api-{round_} pod logs from the last hour and make sure you "
            f"{detail}Always include the pod name api-{round_} in the table."
        )
        summary = await follow_up(api, sid, request, f"Round {round_}: nothing new.")
        assert READ_ONLY in section(summary, 6), f"lost at compaction {round_ + 1}"
        assert len(summary.encode()) <= 12_000
    assert "Always include the pod name api-49 in the table." in summary  # the latest rule


async def test_the_fatal_line_outlasts_many_harmless_errors(api: httpx.AsyncClient) -> None:
    fatal = "FATAL: ledger lock timeout after 30s on shard 7"
    lines = [f"10:00:{n % 60:02d} INFO worker handled request {n}" for n in range(2_000)]
    for n in range(29):
        lines[100 + 10 * n] = f"10:01:{n:02d} ERROR ledger client: connection reset, retrying {n}"
    lines[1_500] = fatal
    sid = await session_with(
        api,
        user("Why did the ledger job stop?"),
        assistant_calls(("call-1", "read")),
        tool_result("call-1", "\n".join(lines)),
    )
    summary = await compact(api, sid)
    for round_ in range(25):
        assert any(fatal in line for line in section(summary, 4)), summary
        calls = [assistant_calls((f"call-r{round_}", "read"))]
        log = f"10:02:{round_:02d} ERROR ledger client: connection reset, retrying ({round_})"
        response = await append(
            api, sid, user("check again"), *calls, tool_result(f"call-r{round_}", log)
        )
        assert response.status_code == 201, response.text
        summary = await compact(api, sid)
    assert fatal in await next_request_text(api, sid)


async def test_the_latest_metric_value_replaces_the_earlier_one(api: httpx.AsyncClient) -> None:
    sid = await session_with(api, user("Watch the error rate of payments-api."))
    summary = ""
    for round_ in range(1, 31):
        reply = f"Round {round_}: orders are still failing."
        if round_ == 4:
            reply = "Round 4: error_rate 2.3 %, orders are still failing."
        if round_ == 18:
            reply = "Round 18: error_rate 0.1 %, orders recovered."
        summary = await follow_up(api, sid, "any news?", reply)
        if 4 <= round_ < 18:
            assert "Metric: error_rate 2.3 %" in section(summary, 5)
    assert "Metric: error_rate 0.1 % (replaces 2.3 %)" in section(summary, 5)
    assert "error_rate 0.1 %" in await next_request_text(api, sid)


async def test_a_chinese_paragraph_keeps_its_constraint_and_its_ticket(
    api: httpx.AsyncClient,
) -> None:
    constraint = "注意：不要修改 migration 目录下的任何文件，也不要改数据库结构。"
    filler = "我们昨天看了很多监控图表，大部分指标都正常，只有少数几个接口偶尔变慢。" * 12
    paragraph = f"请修复工单PAY-7731里的退款金额四舍五入问题。{filler}{constraint}谢谢。"
    assert len(paragraph) > 400
    sid = await session_with(api, user(paragraph), assistant("好的。"))
    summary = await compact(api, sid)
    for round_ in range(5):
        [entry] = [line for line in section(summary, 6) if "PAY-7731" in line]
        assert constraint in entry
        assert "more characters]" not in entry
        [identifiers] = [line for line in section(summary, 2) if line.startswith("Identifiers")]
        assert "PAY-7731" in identifiers
        summary = await follow_up(api, sid, "继续", f"第 {round_} 轮。")
