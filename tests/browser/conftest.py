"""A real browser for page tests: Debian's Chromium driven by Playwright, offline.

The browser is the system package (``/usr/bin/chromium``, installed by ``.ci/run``); Playwright
never downloads one. Every request to a host other than loopback is aborted and recorded, so a
page that reaches for a CDN both fails to render and fails the test that checks
``offline_page.blocked``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

CHROMIUM = os.environ.get("CTXSVC_TEST_CHROMIUM", "/usr/bin/chromium")
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
# Without the background-networking flags Chromium keeps dialling Google's hosts, which this
# machine's closed network refuses many at a time.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class OfflinePage:
    """A browser page whose requests can only reach loopback."""

    page: Page
    blocked: list[str] = field(default_factory=list)


# Per module, not per session: while ``sync_playwright`` is open, its event loop counts as the
# running loop of the main thread, so every async test (and ``asyncio.run``) after it would fail
# with "Cannot run the event loop while another loop is running".
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # Playwright gives each launch a fresh, empty profile: nothing cached from an earlier run can
    # hide a CDN load.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def offline_page(browser: Browser) -> Iterator[OfflinePage]:
    """A new page in a new context; non-loopback requests are aborted and listed in ``blocked``."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    offline = OfflinePage(page=context.new_page())

    def guard(route: Route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOOPBACK_HOSTS:
            route.continue_()
        else:
            offline.blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    try:
        yield offline
    finally:
        context.close()
