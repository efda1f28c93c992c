"""``/docs`` and ``/redoc`` name no external address, and the app serves everything they load.

The browser tests (``tests/browser/test_api_docs.py``) watch what a real page requests; this one
reads the pages' HTML, so a URL that a browser would fetch only sometimes (another host name, a
missing favicon) is caught too.
"""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.anyio

ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']""")


@pytest.mark.parametrize(
    ("page", "expected_assets"),
    [
        ("/docs", {"text/css", "text/javascript", "image/png"}),
        ("/redoc", {"text/javascript", "image/png"}),
    ],
)
async def test_a_docs_page_loads_only_what_the_service_serves(
    stateless_client: httpx.AsyncClient, page: str, expected_assets: set[str]
) -> None:
    response = await stateless_client.get(page)
    assert response.status_code == 200
    html = response.text
    assert re.search(r"https?://", html) is None  # no CDN, no Google fonts
    assets = ASSET.findall(html)
    kinds = set()
    for url in assets:
        assert url.startswith("/"), url
        asset = await stateless_client.get(url)
        assert asset.status_code == 200, url
        kinds.add(asset.headers["content-type"].split(";")[0])
    assert kinds == expected_assets


async def test_redocs_logo_is_served_beside_the_page(stateless_client: httpx.AsyncClient) -> None:
    # ReDoc's bundle shows its logo from ``<page path>/logo-mini.svg`` (no CDN address in it).
    bundle = await stateless_client.get("/redoc/redoc.standalone.js")
    assert bundle.status_code == 200
    assert "cdn.redoc.ly" not in bundle.text
    logo = await stateless_client.get("/redoc/logo-mini.svg")
    assert logo.status_code == 200
    assert logo.headers["content-type"].startswith("image/svg+xml")
