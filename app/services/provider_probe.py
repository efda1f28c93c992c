"""Whether the providers of the callable models answer at all: ``GET /readyz?providers=true``.

Only asked for: a readiness probe that fails when a provider is down would take every replica out
of rotation for something no restart fixes, so the default ``/readyz`` checks the database alone.
An operator (or a deployment's smoke test) asks explicitly to learn, in one request, whether each
``base_url`` is reachable from this process, through the same proxy and trust settings as the
calls themselves.

Probed: each distinct ``base_url`` of a model this process can call (``ModelClients.readiness``
is ``ready``: a built-in model without its key in the environment is left out). The probe is a
plain ``GET base_url`` without a key: any HTTP answer, even 404, proves the provider reachable;
only a failed connection or no answer within ``PROBE_SECONDS`` counts against it. Nothing is
billed and nothing is logged by the provider as a model call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

from app.providers._connection import connection_failure, printable_url
from app.providers.http_client import ProviderHTTP
from app.providers.urls import base_url_problem
from app.services.model_clients import ModelClients
from app.services.model_types import ModelEntry

__all__ = ["PROBE_SECONDS", "ProviderProbe", "probe_providers"]

PROBE_SECONDS = 5.0
_NETWORK_KINDS = frozenset({"openai_chat", "openai_responses", "anthropic_messages"})


@dataclass(frozen=True, slots=True)
class ProviderProbe:
    """One provider address, the models behind it, and whether it answered."""

    base_url: str  # printable: no credentials, no query
    models: tuple[str, ...]
    reachable: bool
    detail: str | None = None  # why not, when it is unreachable

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "base_url": self.base_url,
            "models": list(self.models),
            "reachable": self.reachable,
        }
        if self.detail is not None:
            body["detail"] = self.detail
        return body


async def _probe(http: ProviderHTTP, base_url: str, models: tuple[str, ...]) -> ProviderProbe:
    shown = printable_url(base_url)
    url_problem = base_url_problem(base_url)
    if url_problem is not None:  # a row stored before the rule existed
        return ProviderProbe(shown, models, False, f"base_url {url_problem}")
    route = http.route(base_url)
    if route.problem is not None:
        return ProviderProbe(shown, models, False, route.problem)
    try:
        async with http.session().get(
            base_url,
            proxy=route.proxy,
            proxy_headers=route.proxy_headers,
            headers=route.headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=PROBE_SECONDS),
        ):
            return ProviderProbe(shown, models, True)
    except TimeoutError:
        detail = f"the provider at {shown} did not answer within {PROBE_SECONDS:g} s"
    except aiohttp.ClientError as exc:
        detail = connection_failure(base_url, exc)
    return ProviderProbe(shown, models, False, detail)


async def probe_providers(entries: list[ModelEntry], clients: ModelClients) -> list[ProviderProbe]:
    """One probe per distinct ``base_url`` of the callable network models, in URL order."""
    by_url: dict[str, list[str]] = {}
    for entry in entries:
        provider = entry.provider
        if provider.kind not in _NETWORK_KINDS or not provider.base_url:
            continue
        if clients.readiness(entry).status != "ready":
            continue
        by_url.setdefault(provider.base_url, []).append(entry.id)
    return list(
        await asyncio.gather(
            *(_probe(clients.http, url, tuple(ids)) for url, ids in sorted(by_url.items()))
        )
    )
