"""The context map in a real browser (Debian's Chromium, offline) against a real server.

What a person sees must be what ``GET .../context`` says: the same region totals, the same
per-message counts (adding up to the Conversation's), the same compaction line. The page follows
the session live, works with an API key kept in session storage (never in a URL), and reaches
nothing beyond loopback.

Screenshots of the map (fresh, heavy with pruned results, after a compaction) go to a temporary
directory, or to ``$CTXSVC_SCREENSHOTS_DIR`` when set: ``CTXSVC_SCREENSHOTS_DIR=docs
.venv/bin/python -m pytest tests/browser/test_context_map.py`` regenerates the ones in ``docs/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from ctxsvc_client import Client
from tests.browser.conftest import OfflinePage
from tests.servers import ServerProcess, streaming_server

API_KEY = "map-test-key-1b6e0c9d2a7f4e53"
WAIT_MS = 30_000  # generous: the machine may be loaded; conditions, not sleeps
AGENT = {
    "system_prompt": "You are a careful coding agent.",
    "tools": [{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}],
    "preset": "coding",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with streaming_server(tmp_path_factory.mktemp("map-server")) as process:
        yield process


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cwd = tmp_path_factory.mktemp("map-keyed-server")
    with streaming_server(cwd, CTXSVC_API_KEYS=json.dumps([API_KEY])) as process:
        yield process


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = os.environ.get("CTXSVC_SCREENSHOTS_DIR")
    return Path(target) if target else tmp_path


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": "read", "input": '{"path": "app.log"}'}


def result(call_id: str, output: str) -> dict[str, Any]:
    block = {"type": "tool_result", "id": call_id, "name": "read", "output": [text(output)]}
    return {"role": "tool", "content": [block]}


def heavy_session(client: Client) -> str:
    """Two old results pruned by a session prepare, one over the projection line, one call
    without a result (synthesized): every mark but ``filtered`` (unit-tested in the core)."""
    client.put_model(
        "map-heavy",
        context_window_tokens=20_000,
        max_output_tokens=1_000,
        max_reasoning_tokens=500,
        fixed_reserve_tokens=200,
        safety_margin_tokens=300,
        provider={"kind": "local"},
    )
    session = client.create_session(
        model_id="map-heavy", summary_model_id="local", title="Heavy session", agent=AGENT
    )
    log = "".join(f"{n:05d} INFO request served in 12 ms\n" for n in range(1000))
    client.append_messages(
        session.id,
        [
            {"role": "user", "content": [text("Why is the service slow? Read the logs.")]},
            {"role": "assistant", "content": [call("c1")]},
            result("c1", log),
            {"role": "assistant", "content": [text("Reading the second log."), call("c2")]},
            result("c2", log.replace("INFO", "WARN")),
            {"role": "assistant", "content": [text("Both logs are long and mostly quiet.")]},
        ],
    )
    prepared = client.prepare_session(session.id)  # at the line: prunes the two results
    assert prepared.projection.pruned_tool_results == 2, prepared.projection
    client.append_messages(
        session.id,
        [
            {"role": "user", "content": [text("Now the access log.")]},
            {"role": "assistant", "content": [call("c3")]},
            result("c3", "GET /v1/sessions 200\n" * 2000),  # over 32 000 bytes: truncated
            {"role": "assistant", "content": [call("c4")]},  # never answered: synthesized
            {"role": "user", "content": [text("And the conclusion?")]},
        ],
    )
    return session.id


def open_map(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#part .map")).to_be_visible(timeout=WAIT_MS)


def region_tokens(page: Page, region: str) -> int:
    cell = page.locator(f'tr[data-region="{region}"] td[data-tokens]')
    return int(cell.get_attribute("data-tokens") or "-1")


def assert_map_equals_context(page: Page, context: dict[str, Any]) -> None:
    budget = context["budget"]
    for region, key in [
        ("system", "system_context_tokens"),
        ("conversation", "conversation_tokens"),
        ("tools", "tool_surface_tokens"),
        ("output", "reserved_output_tokens"),
    ]:
        assert region_tokens(page, region) == budget[key], region
    free = budget["effective_input_tokens"] - budget["estimated_input_tokens"]
    assert region_tokens(page, "free") == max(free, 0)
    line = min(budget["auto_compact_token_limit"], budget["effective_input_tokens"])
    assert region_tokens(page, "line") == line
    percent = page.locator("#auto-compact-percent").get_attribute("data-percent")
    assert float(percent or "-1") == context["auto_compact_percent"]
    rows = page.locator("li.row")
    provenance = context["provenance"]
    expect(rows).to_have_count(len(provenance))
    shown = [
        (int(r.get_attribute("data-tokens") or "-1"), r.get_attribute("data-provenance"))
        for r in rows.all()
    ]
    assert shown == [(p["tokens"], p["type"]) for p in provenance]
    assert sum(tokens for tokens, _ in shown) == budget["conversation_tokens"]


def marks(page: Page) -> list[str]:
    return [r.get_attribute("data-marks") or "" for r in page.locator("li.row").all()]


def test_the_map_of_a_heavy_session_shows_what_the_context_says(
    server: ServerProcess, offline_page: OfflinePage, shots: Path
) -> None:
    page = offline_page.page
    with Client(server.url, timeout=60) as client:
        session_id = heavy_session(client)
        context = httpx.get(f"{server.url}/v1/sessions/{session_id}/context", timeout=30).json()
    open_map(page, f"{server.url}/ui/sessions/{session_id}")
    assert_map_equals_context(page, context)
    shown = marks(page)
    projection = context["projection"]
    assert sum("pruned" in m.split() for m in shown) == projection["pruned_tool_results"] == 2
    assert sum("truncated" in m.split() for m in shown) == projection["truncated_tool_results"]
    assert shown.count("synthesized") == projection["synthesized_tool_results"] == 1
    # The window's parts add up to the window.
    window = sum(
        region_tokens(page, r)
        for r in (
            "system",
            "conversation",
            "tools",
            "output",
            "free",
            "reasoning",
            "reserve",
            "margin",
        )
    )
    assert window == context["budget"]["context_window_tokens"] == 20_000
    # A row opens on the content as sent: the pruned result shows its marker, not the log.
    pruned = page.locator('li.row[data-marks~="pruned"]').first
    pruned.locator("summary").first.click()
    expect(pruned.locator(".content")).to_contain_text("[tool result pruned:")
    page.screenshot(path=shots / "context-map-heavy.png", full_page=True)
    assert offline_page.blocked == []


def test_a_fresh_session_then_an_append_and_a_turn_appear_without_reload(
    server: ServerProcess, offline_page: OfflinePage, shots: Path
) -> None:
    page = offline_page.page
    with Client(server.url, timeout=60) as client:
        session = client.create_session(model_id="local", title="Fresh session", agent=AGENT)
        url = f"{server.url}/ui/sessions/{session.id}"
        open_map(page, url)
        expect(page.locator("li.row")).to_have_count(0)
        assert region_tokens(page, "conversation") == 0
        page.screenshot(path=shots / "context-map-fresh.png", full_page=True)
        expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        page.evaluate("window.__notReloaded = true")

        client.append_messages(session.id, [{"role": "user", "content": [text("Hello there.")]}])
        expect(page.locator("li.row")).to_have_count(1, timeout=WAIT_MS)
        expect(page.locator("li.row .preview")).to_have_text("Hello there.")

        turn = client.run_turn(session.id, "Summarize ticket ABC-123.")
        assert turn.status == "completed"
        finished = page.locator(f'li.turn[data-turn="{turn.turn_id}"][data-status="completed"]')
        expect(finished).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#status")).to_have_attribute("data-status", "idle", timeout=WAIT_MS)
        context = client.get_context(session.id).model_dump(mode="json")
    expect(page.locator("li.row")).to_have_count(len(context["provenance"]), timeout=WAIT_MS)
    assert page.evaluate("window.__notReloaded") is True
    assert_map_equals_context(page, context)
    assert offline_page.blocked == []


def test_a_compaction_shows_in_the_timeline_and_its_transcript_is_one_click_away(
    server: ServerProcess, offline_page: OfflinePage, shots: Path
) -> None:
    page = offline_page.page
    with Client(server.url, timeout=60) as client:
        session = client.create_session(model_id="local", title="Compacted session", agent=AGENT)
        client.run_turn(session.id, "Find why the nightly build fails on ARM.")
        client.run_turn(session.id, "Then propose a fix.")
        open_map(page, f"{server.url}/ui/sessions/{session.id}")
        expect(page.locator("li.checkpoint")).to_have_count(0)
        checkpoint = client.compact(session.id, allow_larger=True)
        entry = page.locator(f'li.checkpoint[data-compaction="{checkpoint.compaction_id}"]')
        expect(entry).to_be_visible(timeout=WAIT_MS)
        context = client.get_context(session.id).model_dump(mode="json")
    expect(page.locator('li.row[data-provenance="synthesized"]')).to_have_count(3, timeout=WAIT_MS)
    assert_map_equals_context(page, context)
    page.screenshot(path=shots / "context-map-compacted.png", full_page=True)

    entry.get_by_role("link").click()
    expect(page.locator(".checkpoint-page")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("pre.text").first).to_contain_text(
        '<conversation_summary format_version="1">'
    )
    transcript = page.locator(".transcript li.row")
    expect(transcript).to_have_count(checkpoint.through_message_sequence)
    expect(transcript.first).to_contain_text("Find why the nightly build fails on ARM.")
    assert offline_page.blocked == []


def test_the_keyed_flow_asks_once_and_never_puts_the_key_in_a_url(
    keyed_server: ServerProcess, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    seen: list[tuple[str, str | None]] = []
    page.on("request", lambda r: seen.append((r.url, r.headers.get("authorization"))))
    with Client(keyed_server.url, api_key=API_KEY, timeout=60) as client:
        session = client.create_session(model_id="local", title="Keyed", agent=AGENT)
        client.append_messages(session.id, [{"role": "user", "content": [text("Secret work.")]}])
        page.goto(f"{keyed_server.url}/ui/sessions/{session.id}")
        expect(page.locator("#key-form")).to_be_visible(timeout=WAIT_MS)
        assert page.locator(".map").count() == 0
        assert "Secret work." not in page.content()

        page.fill("#api-key", "not-the-key")
        page.click("#key-form button[type=submit]")
        expect(page.locator("#key-error")).to_contain_text("refused", timeout=WAIT_MS)

        page.fill("#api-key", API_KEY)
        page.click("#key-form button[type=submit]")
        expect(page.locator("li.row .preview")).to_have_text("Secret work.", timeout=WAIT_MS)
        expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        client.append_messages(session.id, [{"role": "user", "content": [text("More.")]}])
        expect(page.locator("li.row")).to_have_count(2, timeout=WAIT_MS)

        page.reload()  # the key stays for the tab: no second prompt
        expect(page.locator("li.row")).to_have_count(2, timeout=WAIT_MS)
        assert page.locator("#key-form").is_hidden()
        page.click("#forget-key")
        expect(page.locator("#key-form")).to_be_visible()
        assert page.evaluate("sessionStorage.length") == 0

    assert all(API_KEY not in url for url, _ in seen)
    authorized = {url.split("?")[0] for url, auth in seen if auth == f"Bearer {API_KEY}"}
    assert f"{keyed_server.url}/ui/parts/sessions/{session.id}" in authorized
    assert f"{keyed_server.url}/v1/sessions/{session.id}/events" in authorized
    assert offline_page.blocked == []


def test_the_sessions_list_is_newest_first_paginated_with_token_use(
    server: ServerProcess, offline_page: OfflinePage
) -> None:
    page = offline_page.page
    with Client(server.url, timeout=60) as client:
        first = client.create_session(model_id="local", title="The oldest here", agent=AGENT)
        client.append_messages(first.id, [{"role": "user", "content": [text("x" * 4000)]}])
        for n in range(25):
            client.create_session(model_id="local", title=f"Filler {n}", agent=AGENT)
        newest = client.list_sessions(limit=25)
    page.goto(f"{server.url}/ui")
    rows = page.locator("tr[data-session]")
    expect(rows).to_have_count(25, timeout=WAIT_MS)
    assert [r.get_attribute("data-session") for r in rows.all()] == [s.id for s in newest.sessions]
    page.get_by_role("link", name="Older →").click()
    oldest = page.locator(f'tr[data-session="{first.id}"]')
    expect(oldest).to_be_visible(timeout=WAIT_MS)
    history = oldest.locator("td.heavy").get_attribute("data-tokens")
    assert int(history or "-1") == client_history(server, first.id) > 1000
    oldest.get_by_role("link").click()
    expect(page.locator("#part .map")).to_be_visible(timeout=WAIT_MS)
    assert offline_page.blocked == []


def client_history(server: ServerProcess, session_id: str) -> int:
    with Client(server.url) as client:
        return client.get_session(session_id).active_history_tokens


def test_the_map_is_readable_on_a_phone(server: ServerProcess, offline_page: OfflinePage) -> None:
    page = offline_page.page
    page.set_viewport_size({"width": 390, "height": 844})
    with Client(server.url, timeout=60) as client:
        session_id = heavy_session(client)
    open_map(page, f"{server.url}/ui/sessions/{session_id}")
    # Nothing wider than the screen: the page never scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    expect(page.locator(".bar")).to_be_visible()
    assert offline_page.blocked == []


def test_pins_and_proposals_show_on_the_map_and_follow_the_session(
    server: ServerProcess, offline_page: OfflinePage, shots: Path
) -> None:
    page = offline_page.page
    with Client(server.url, timeout=60) as client:
        session = client.create_session(model_id="local", title="Pinned session", agent=AGENT)
        pinned = client.create_pin(
            session.id, kind="fact", text="The incident is INC-42.\nIt began at 09:12 UTC."
        )
        open_map(page, f"{server.url}/ui/sessions/{session.id}")
        shown = page.locator(f'li.pin[data-pin="{pinned.pin_id}"]')
        expect(shown).to_have_attribute("data-kind", "fact")
        expect(shown.locator(".pin-text")).to_have_text(
            "The incident is INC-42.\nIt began at 09:12 UTC."
        )
        # Pinned, not yet sent: no row carries it until a model call samples the World State.
        expect(page.locator("#pins-sent")).to_have_attribute("data-rows", "")
        expect(page.locator("#pins-sent")).to_have_attribute("data-current", "false")
        expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=WAIT_MS)

        client.append_messages(
            session.id,
            [{"role": "user", "content": [text("Check it. Never restart the database.")]}],
        )
        proposal = page.locator("li.proposal")
        expect(proposal).to_have_text("Never restart the database.", timeout=WAIT_MS)
        (open_one,) = client.list_pin_proposals(session.id).proposals
        accepted = client.accept_pin_proposal(session.id, open_one.proposal_id)
        expect(page.locator(f'li.pin[data-pin="{accepted.pin_id}"]')).to_have_attribute(
            "data-kind", "constraint", timeout=WAIT_MS
        )
        expect(proposal).to_have_count(0)

        client.prepare_session(session.id)  # samples the World State: the pins are sent
        context = client.get_context(session.id).model_dump(mode="json")
    sent = page.locator("#pins-sent")
    expect(sent).not_to_have_attribute("data-rows", "", timeout=WAIT_MS)
    expect(sent).to_have_attribute("data-current", "true")
    (position,) = [int(p) for p in (sent.get_attribute("data-rows") or "").split()]
    row = page.locator(f'li.row[data-position="{position}"]')
    expect(row).to_have_attribute("data-role", "user")
    expect(row.locator(".kind")).to_have_text("world state")
    expect(row.locator(".preview")).to_contain_text("pinned_context")
    # Counted in the budget: the map's rows still add up to the Conversation region.
    assert_map_equals_context(page, context)
    page.screenshot(path=shots / "context-map-pins.png", full_page=True)
    # A change after the last sample: the map says the next model call sends it.
    with Client(server.url, timeout=60) as client:
        client.remove_pin(session.id, pinned.pin_id)
    expect(sent).to_have_attribute("data-current", "false", timeout=WAIT_MS)
    expect(sent).to_contain_text("the next model call sends the change")
    assert offline_page.blocked == []
