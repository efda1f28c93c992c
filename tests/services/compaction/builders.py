"""Builders shared by the compaction service and API tests."""

from __future__ import annotations

from typing import Any

import httpx

from app.core.compaction.request import SUMMARY_HEADINGS
from tests.core.compaction.summaries import summary

VALID = summary()

BIG_TEXT = "0123456789abcdef" * 1250  # 20 000 characters: over the 8192 pruning line


def headings_missing(index: int) -> str:
    return summary([h for i, h in enumerate(SUMMARY_HEADINGS) if i != index])


def heading_duplicated(index: int) -> str:
    headings = list(SUMMARY_HEADINGS)
    headings.insert(index + 1, SUMMARY_HEADINGS[index])
    return summary(headings)


def headings_swapped(index: int) -> str:
    headings = list(SUMMARY_HEADINGS)
    headings[index], headings[index + 1] = headings[index + 1], headings[index]
    return summary(headings)


async def scripted_model(
    api: httpx.AsyncClient, model_id: str, script: list[dict[str, Any]], **caps: Any
) -> None:
    body = {
        "context_window_tokens": 200_000,
        "max_output_tokens": 20_000,
        **caps,
        "provider": {"kind": "scripted", "script": script},
    }
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code in (200, 201), response.text
