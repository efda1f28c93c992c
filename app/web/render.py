"""Jinja2 templates of the context map, and the HTML responses that carry them."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

__all__ = ["HTML_HEADERS", "html", "render"]

# Nothing but this origin: a page can neither load nor send anything elsewhere (no CDN, no
# beacon). Inline styles only as ``style`` attributes (the bar's widths); no inline script.
HTML_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def tokens(value: int | None) -> str:
    """``12 345`` (narrow no-break spaces between thousands), ``–`` for none."""
    return "–" if value is None else f"{value:,}".replace(",", "\u202f")


def when(value: str | None) -> str:
    """``2026-12-01T21:28:05.091322Z`` → ``2026-12-01 21:28:05 UTC``."""
    if not value:
        return "–"
    day, _, time = value.partition("T")
    return f"{day} {time[:8]} UTC" if time else day


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("app.web", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tokens"] = tokens
    env.filters["when"] = when
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def html(body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status_code, headers=HTML_HEADERS)
