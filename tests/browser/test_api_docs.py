"""``/docs`` (Swagger UI) and ``/redoc`` in a real browser with no internet.

Both pages come from a real uvicorn process; the browser can reach only loopback
(``offline_page``), so a page that fetched Swagger UI, ReDoc, a font or a favicon from a CDN would
render nothing and list the request in ``blocked``. Each test checks that every operation of the
served OpenAPI description is rendered, and the keyed server's test walks the "Authorize" flow a
newcomer uses to try the API from the page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from tests.browser.conftest import OfflinePage
from tests.servers import ServerProcess, clean_env, free_port, running, uvicorn_command

pytestmark = pytest.mark.slow

KEY = "docs-browser-key-5f2a9c7e1b3d4068"
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}
# Rendering the whole description (~30 operations, a large schema) on a loaded 2-core machine.
RENDER_TIMEOUT_MS = 90_000


def _serve(tmp_path: Path, **settings: str) -> Iterator[ServerProcess]:
    with running([uvicorn_command(free_port())], env=clean_env(**settings), cwd=tmp_path) as [
        server
    ]:
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _serve(tmp_path_factory.mktemp("docs-open"))


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _serve(tmp_path_factory.mktemp("docs-keyed"), CTXSVC_API_KEYS=json.dumps([KEY]))


def documented_operations(server: ServerProcess) -> set[tuple[str, str]]:
    spec = httpx.get(server.url + "/openapi.json", timeout=30.0).json()
    return {
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def page_errors(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def console_warnings(page: Page) -> list[str]:
    warnings: list[str] = []
    page.on(
        "console",
        lambda message: warnings.append(message.text) if message.type == "warning" else None,
    )
    return warnings


def swagger_operations(page: Page) -> set[tuple[str, str]]:
    summaries = page.locator(".opblock-summary")
    rendered = set()
    for index in range(summaries.count()):
        summary = summaries.nth(index)
        method = summary.locator(".opblock-summary-method").inner_text().strip()
        path = summary.locator(".opblock-summary-path").get_attribute("data-path")
        rendered.add((method.upper(), str(path)))
    return rendered


def test_swagger_ui_renders_every_operation_offline(
    offline_page: OfflinePage, open_server: ServerProcess
) -> None:
    page = offline_page.page
    errors = page_errors(page)
    expected = documented_operations(open_server)
    page.goto(open_server.url + "/docs")
    page.locator(".opblock-summary").nth(len(expected) - 1).wait_for(timeout=RENDER_TIMEOUT_MS)

    assert swagger_operations(page) == expected
    assert page.locator(".info .title").inner_text().startswith("ctxsvc")
    assert offline_page.blocked == []
    assert errors == []


def redoc_operations(page: Page) -> set[tuple[str, str]]:
    # Each operation's endpoint panel: the verb, then the path beside it.
    pairs = page.eval_on_selector_all(
        ".http-verb",
        "verbs => verbs.map(v => [v.textContent, v.nextElementSibling?.textContent ?? ''])",
    )
    return {(str(verb).upper(), str(path)) for verb, path in pairs}


def test_redoc_renders_every_operation_offline(
    offline_page: OfflinePage, open_server: ServerProcess
) -> None:
    page = offline_page.page
    errors = page_errors(page)
    warnings = console_warnings(page)
    expected = documented_operations(open_server)
    page.goto(open_server.url + "/redoc")
    page.locator(".http-verb").nth(len(expected) - 1).wait_for(timeout=RENDER_TIMEOUT_MS)

    assert redoc_operations(page) == expected
    assert page.locator("h1").first.inner_text().startswith("ctxsvc")
    # ReDoc's own logo (bottom of the menu) comes from the service too, not from its CDN.
    logo = page.locator('img[alt="redocly logo"]')
    assert logo.get_attribute("src") == "/redoc/logo-mini.svg"
    assert offline_page.blocked == []
    assert errors == []
    # ReDoc merges each error's schema (allOf: Problem, then its status and codes) and warns
    # when the shapes disagree: none may.
    assert [w for w in warnings if "allOf" in w] == []


def _execute(page: Page) -> tuple[str, str]:
    """Press Execute in the expanded operation: the live response's status code and body."""
    page.locator(".opblock.is-open .btn.execute").click()
    live = page.locator(".opblock.is-open .live-responses-table tr.response").first
    live.wait_for(timeout=RENDER_TIMEOUT_MS)
    code = live.locator(".response-col_status").inner_text().split()[0]
    body = live.locator(".response-col_description").inner_text()
    page.locator(".opblock.is-open .btn-clear").click()  # the next Execute shows a fresh answer
    return code, body


def test_authorize_with_an_api_key_makes_try_it_out_succeed(
    offline_page: OfflinePage, keyed_server: ServerProcess
) -> None:
    page = offline_page.page
    errors = page_errors(page)
    page.goto(keyed_server.url + "/docs")
    operation = page.locator(".opblock-get").filter(
        has=page.locator('.opblock-summary-path[data-path="/v1/models"]')
    )
    operation.locator(".opblock-summary").click(timeout=RENDER_TIMEOUT_MS)
    operation.locator(".try-out__btn").click()

    status, body = _execute(page)
    assert status == "401"  # the keyed server refuses the page's call without a key
    assert "unauthorized" in body

    page.locator(".auth-wrapper .btn.authorize").click()
    dialog = page.locator(".dialog-ux")
    dialog.locator("input").fill(KEY)
    dialog.locator(".auth-btn-wrapper .btn.authorize").click()
    # Swagger UI took the key: the dialog offers to log out instead.
    dialog.locator("button", has_text="Logout").wait_for(timeout=RENDER_TIMEOUT_MS)
    dialog.locator(".btn-done").click()

    status, body = _execute(page)
    assert status == "200"
    assert '"id": "local"' in body  # the model list, as the API answers it
    assert offline_page.blocked == []
    assert errors == []
