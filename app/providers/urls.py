"""What makes a provider ``base_url`` (or a proxy variable) usable by the HTTP adapters.

A ``base_url`` is checked when a model is registered (``invalid_base_url``, nothing stored) and
again by the adapter before a call (a row stored before the check existed fails its turn with
the same sentence instead of an internal error). The adapter appends the endpoint path
(``/chat/completions``, ``/v1/messages``) to the URL and routes it through ``urllib.parse``
(proxy settings) and aiohttp, so what both parse the same way and aiohttp can send is accepted.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from app.providers.destinations import host_problem

__all__ = ["base_url_problem", "destination_problem", "http_url"]


def http_url(url: str) -> SplitResult | str:
    """``url`` split, when it is an absolute ``http(s)://`` URL with a host that urllib and
    aiohttp read alike; else why not (a clause completing "the URL …")."""
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "contains whitespace or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # parsed on access: a port out of range raises here
    except ValueError as exc:  # an unclosed IPv6 bracket, a port out of range
        return f"is not a valid URL ({exc})"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "is not an absolute http:// or https:// URL with a host"
    if port == 0:
        return "names port 0"
    return parts


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a provider's ``base_url`` (a clause completing "base_url …"), or
    ``None`` when it can."""
    parts = http_url(url)
    if isinstance(parts, str):
        return parts
    if parts.username is not None or parts.password is not None:
        # Keys never travel in request bodies, and aiohttp refuses URL credentials next to the
        # adapter's own authentication header.
        return (
            "carries credentials (user:password@); put the API key in the environment variable "
            "named by api_key_env instead"
        )
    if parts.query or parts.fragment:
        return "has a query or a fragment; the adapter appends the endpoint path to base_url"
    return None


def destination_problem(url: str, *, allow_private: bool) -> str | None:
    """Why ``url``'s host may not be reached, as far as can be told without resolving it
    (a clause completing "base_url …"; ``app.providers.destinations``), or ``None``."""
    parts = http_url(url)
    if isinstance(parts, str) or parts.hostname is None:
        return None  # ``base_url_problem`` says what is wrong
    problem = host_problem(parts.hostname, allow_private=allow_private)
    return None if problem is None else f"names a host that is refused: {problem}"
