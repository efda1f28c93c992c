"""``auto_compact_percent`` at the trigger line: ≥ 100 exactly when the session compacts."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.api.helpers import append, new_session, user

pytestmark = pytest.mark.anyio

MAX_OUTPUT = 32_000  # the reserve alone puts the line above 20 000, where 2 decimals blur


async def model_with_line(api: httpx.AsyncClient, line: int) -> str:
    """A fresh model whose trigger line, ⌈85 % of (window − output)⌉, is ``line``."""
    model_id = f"line-{uuid.uuid4().hex[:8]}"
    # ⌊line / 0.85⌋ is the largest effective input whose 85 % rounds up to ``line``.
    window = line * 100 // 85 + MAX_OUTPUT
    body = {
        "context_window_tokens": window,
        "max_output_tokens": MAX_OUTPUT,
        "output_reserve_tokens": MAX_OUTPUT,
    }
    response = await api.put(f"/v1/models/{model_id}", json={**body, "provider": {"kind": "local"}})
    assert response.status_code == 201, response.text
    return model_id


@pytest.mark.parametrize(("above", "percent", "compacts"), [(1, 99.99, False), (0, 100.0, True)])
async def test_the_percent_reaches_100_at_the_trigger_line_not_before(
    api: httpx.AsyncClient, above: int, percent: float, compacts: bool
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("hello"))
    budget = (await api.get(f"/v1/sessions/{sid}/context")).json()["budget"]
    # Both models count with "estimate": only the reserve changes with the model.
    used = budget["estimated_input_tokens"] + MAX_OUTPUT
    model_id = await model_with_line(api, used + above)
    assert (await api.patch(f"/v1/sessions/{sid}", json={"model_id": model_id})).status_code == 200

    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    budget = context["budget"]
    assert budget["auto_compact_token_limit"] == used + above
    assert budget["estimated_input_tokens"] + budget["reserved_output_tokens"] == used
    assert budget["reaches_auto_compact_limit"] is compacts
    assert context["auto_compact_percent"] == percent
