"""Each of the nine headings missing, duplicated or out of order, end to end through a scripted
summary model (the full matrix of rules is unit-tested in ``tests/core/compaction``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from app.core.compaction.request import SUMMARY_HEADINGS
from tests.api.helpers import append, new_session, user
from tests.conftest import client_for, make_settings
from tests.services.compaction.builders import (
    heading_duplicated,
    headings_missing,
    headings_swapped,
    scripted_model,
)

pytestmark = pytest.mark.anyio

CASES: list[tuple[str, Callable[[int], str], int]] = [
    *((f"missing-{i + 1}", headings_missing, i) for i in range(9)),
    *((f"duplicated-{i + 1}", heading_duplicated, i) for i in (0, 8)),
    *((f"swapped-{i + 1}-{i + 2}", headings_swapped, i) for i in (0, 7)),
]


@pytest.fixture
async def api(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(sqlite_url, summary_attempts=1, summary_retry_delay_seconds=0.0)
    async for client in client_for(settings):
        yield client


@pytest.mark.parametrize(("build", "index"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_a_broken_heading_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, build: Callable[[int], str], index: int
) -> None:
    await scripted_model(api, "summary", [{"text": build(index)}])
    sid = await new_session(api, summary_model_id="summary")
    await append(api, sid, user("Summarize me."))

    response = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})

    assert response.status_code == 502
    problem = response.json()
    assert problem["code"] == "summary_retries_exhausted"
    assert problem["classification"] == "degenerate"
    assert "heading" in problem["last_error"]
    assert (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []
    # The same text posted by a caller's own model is a 422 ``invalid_summary``.
    posted = await api.post(
        f"/v1/sessions/{sid}/compactions", json={"summary": build(index), "allow_larger": True}
    )
    assert (posted.status_code, posted.json()["code"]) == (422, "invalid_summary")


def test_the_cases_cover_every_heading() -> None:
    assert {c[2] for c in CASES if c[1] is headings_missing} == set(range(len(SUMMARY_HEADINGS)))
