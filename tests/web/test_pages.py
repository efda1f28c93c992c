"""The context map's routes over HTTP (the browser tests drive the pages themselves)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api.helpers import append, new_session, user
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio

KEY = "web-test-key-6d2c8e1f0a9b4c37"


@pytest.fixture
async def keyed(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url, api_keys=[KEY])):
        yield client


async def test_an_open_service_serves_the_map_with_its_data_and_a_strict_policy(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api, title="Tour <b>bold</b>")
    await append(api, sid, user("Hello <script>alert(1)</script>"))
    page = await api.get(f"/ui/sessions/{sid}")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert page.headers["cache-control"] == "no-store"
    body = page.text
    assert 'data-loaded="true"' in body
    assert "Tour &lt;b&gt;bold&lt;/b&gt;" in body  # escaped, never markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert(1)" not in body
    assert "http://" not in body.replace("http://test", "")  # nothing from elsewhere
    listing = await api.get("/ui")
    assert listing.status_code == 200
    assert f'data-session="{sid}"' in listing.text


async def test_an_unknown_session_is_a_404_page_that_says_so(api: httpx.AsyncClient) -> None:
    page = await api.get("/ui/sessions/ses-missing")
    assert page.status_code == 404
    assert "ses-missing" in page.text
    assert 'data-code="session_not_found"' in page.text
    part = await api.get("/ui/parts/sessions/ses-missing")
    assert part.status_code == 404
    assert part.json()["code"] == "session_not_found"


async def test_a_keyed_service_serves_an_empty_shell_and_parts_only_with_the_key(
    keyed: httpx.AsyncClient,
) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    created = await keyed.post(
        "/v1/sessions",
        json={"model_id": "local", "agent": {"system_prompt": "Hi."}, "title": "Private"},
        headers=headers,
    )
    sid = created.json()["id"]
    shell = await keyed.get(f"/ui/sessions/{sid}")
    assert shell.status_code == 200
    assert 'data-loaded="false"' in shell.text
    assert 'id="key-form"' in shell.text
    assert "Private" not in shell.text
    refused = await keyed.get(f"/ui/parts/sessions/{sid}")
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthorized"
    part = await keyed.get(f"/ui/parts/sessions/{sid}", headers=headers)
    assert part.status_code == 200
    assert "Private" in part.text
    listed = await keyed.get("/ui/parts/sessions", headers=headers)
    assert f'data-session="{sid}"' in listed.text
    assert (await keyed.get("/ui/parts/sessions")).status_code == 401


async def test_the_static_files_are_served_by_the_app(api: httpx.AsyncClient) -> None:
    script = await api.get("/ui/static/ui.js")
    assert script.status_code == 200
    assert "sessionStorage" in script.text
    assert "://" not in script.text  # it only talks to the page's own origin
    style = await api.get("/ui/static/ui.css")
    assert style.status_code == 200
    assert "url(" not in style.text  # no font or image from anywhere
    assert (await api.get("/ui/static/missing.js")).status_code == 404


async def test_a_forged_cursor_on_the_list_is_refused(api: httpx.AsyncClient) -> None:
    page = await api.get("/ui", params={"cursor": "forged"})
    assert page.status_code == 422
    assert 'data-code="invalid_cursor"' in page.text


async def test_the_map_pages_are_not_in_the_api_description(api: httpx.AsyncClient) -> None:
    spec = json.loads((await api.get("/openapi.json")).text)
    assert not [path for path in spec["paths"] if path.startswith("/ui")]


async def test_an_exact_counters_map_accounts_for_the_reply_priming(
    api: httpx.AsyncClient,
) -> None:
    model = {
        "context_window_tokens": 8000,
        "max_output_tokens": 1000,
        "token_counter": "tiktoken:o200k_base",
        "provider": {"kind": "local"},
    }
    assert (await api.put("/v1/models/web-exact", json=model)).status_code in (200, 201)
    sid = await new_session(api, model_id="web-exact")
    empty = (await api.get(f"/ui/parts/sessions/{sid}")).text
    assert "are the reply priming" in empty
    await append(api, sid, user("Count me exactly."), user("And me."))
    part = (await api.get(f"/ui/parts/sessions/{sid}")).text
    context = (await api.get(f"/v1/sessions/{sid}/context")).json()
    shares = [int(n) for n in re.findall(r'<li class="row[^"]*"[^>]* data-tokens="(\d+)"', part)]
    assert shares == [p["tokens"] for p in context["provenance"]]
    assert sum(shares) == context["budget"]["conversation_tokens"]
    assert "is in the first message's share" in part
