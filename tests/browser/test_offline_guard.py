"""The page guard the page tests rely on: a page that reaches past loopback is caught."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.browser.conftest import OfflinePage

PAGE = b"""<!doctype html><html><head>
<script src="https://cdn.example.invalid/lib.js"></script></head>
<body><p id="local">served from loopback</p></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def page_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_past_loopback_is_blocked_and_listed(
    offline_page: OfflinePage, page_url: str
) -> None:
    offline_page.page.goto(page_url)
    assert offline_page.page.text_content("#local") == "served from loopback"
    assert offline_page.blocked == ["https://cdn.example.invalid/lib.js"]
