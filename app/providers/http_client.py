"""The provider adapters' HTTP client: one ``aiohttp.ClientSession`` per process.

aiohttp rather than httpx because of what a model call costs beyond the provider's own time
(loopback fake provider, 30 KB body, short stream; ``docs/performance.md``, "Turns"): httpx
~1.3 ms, aiohttp ~0.6 ms. The session is made on first use, inside the running event loop (an
aiohttp session belongs to the loop it was made in), and closed by ``aclose`` at shutdown.
Connections are pooled and kept alive between calls (100 at most, idle ones kept 5 s: httpx's
defaults, which the adapters used until now).

What httpx took from the environment is taken from the ``env`` mapping given here (the process
environment in production), once, rather than by aiohttp's ``trust_env`` on every request:

- **proxies**: ``<scheme>_proxy`` (the lower-case name wins over the upper-case one;
  ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set, as in CGI), else ``all_proxy``,
  unless ``no_proxy`` names the host (``urllib``'s rules, as httpx read them). Credentials in
  the proxy URL are sent as ``Proxy-Authorization``. aiohttp speaks to ``http://`` proxies
  (plain requests, and ``CONNECT`` tunnels for ``https://`` providers);
- **trusted certificates**: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, else certifi's
  bundle; certificates and host names are always verified.

``trust_env`` stays off: besides the proxies it would read ``~/.netrc`` in a worker thread on
every request and send a login found there for the provider's host as ``Authorization`` (an
Anthropic call would carry it to the provider beside its key; an OpenAI call, whose key is
``Authorization`` already, would fail).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import certifi

from app.providers.call_stats import note_sent
from app.providers.destinations import GuardedResolver
from app.providers.urls import http_url

__all__ = ["DIRECT", "JsonBody", "ProviderHTTP", "Route", "env_route"]

# httpx's pool defaults (max_connections, keepalive_expiry), kept.
_MAX_CONNECTIONS = 100
_KEEPALIVE_SECONDS = 5.0
# Per-call timeouts are the adapters' (they pass their own with each request); this only
# replaces aiohttp's default of a 5-minute total, which would end a long stream.
_SESSION_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10.0)


class JsonBody(aiohttp.BytesPayload):
    """A request body of encoded JSON, sent as it is (``Content-Length``, one write).

    ``BytesPayload`` warns (a ``ResourceWarning``) about bytes over 1 MiB, suggesting a file-like
    object "not to lock the event loop"; but the transport takes the bytes in one call and
    buffers what the socket does not take at once, which is what aiohttp's ``BytesIO`` payload
    does too. A long conversation's body passes 1 MiB on every call, so the check is skipped."""

    def __init__(self, value: bytes) -> None:
        aiohttp.Payload.__init__(self, value, content_type="application/json")
        self._size = len(value)


@dataclass(frozen=True, slots=True)
class Route:
    """How requests to one URL leave this process: directly, or through ``proxy``. A proxy's
    credentials go with the ``CONNECT`` that opens a tunnel to an ``https://`` provider
    (``proxy_headers``), or with each request to an ``http://`` one (``headers``)."""

    proxy: str | None = None
    proxy_headers: Mapping[str, str] | None = None
    headers: Mapping[str, str] | None = None
    # Why no request can take this route (a proxy variable that is no http(s) URL): each call
    # fails with it, before anything is sent.
    problem: str | None = None


DIRECT = Route()


def env_route(url: str, env: Mapping[str, str]) -> Route:
    """The proxy ``env`` names for ``url`` (see the module docstring), or ``DIRECT``."""
    proxies: dict[str, str] = {}
    # urllib.request.getproxies_environment's reading, of ``env`` instead of os.environ.
    for name, value in env.items():
        if value and name.lower().endswith("_proxy"):
            proxies[name[:-6].lower()] = value
    if "REQUEST_METHOD" in env:
        proxies.pop("http", None)
    for name, value in env.items():
        if name.endswith("_proxy"):
            if value:
                proxies[name[:-6]] = value
            else:
                proxies.pop(name[:-6], None)
    parts = urlsplit(url)
    if _bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return DIRECT
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return DIRECT
    # ``host:port`` is taken as ``http://host:port``, as urllib does.
    proxy_parts = http_url(proxy if "://" in proxy else f"http://{proxy}")
    if isinstance(proxy_parts, str):
        return Route(
            problem=f"the proxy the environment names for {parts.scheme}:// URLs {proxy_parts}; "
            "fix HTTP_PROXY / HTTPS_PROXY / ALL_PROXY where ctxsvc runs and restart"
        )
    if proxy_parts.username is None:
        return Route(proxy_parts.geturl())
    login = aiohttp.encode_basic_auth(
        unquote(proxy_parts.username), unquote(proxy_parts.password or "")
    )
    bare = urlunsplit(proxy_parts._replace(netloc=proxy_parts.netloc.rpartition("@")[2]))
    credentials = {"Proxy-Authorization": login}
    if parts.scheme == "https":
        return Route(bare, proxy_headers=credentials)
    return Route(bare, headers=credentials)


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``no_proxy`` names ``host`` (urllib's ``proxy_bypass_environment``: ``*``, or
    comma-separated names that match the host or a domain it is in, with or without a port)."""
    if not host or not no_proxy:
        return False
    if no_proxy.strip() == "*":
        return True
    host = host.lower()
    with_port = f"{host}:{port}" if port is not None else host
    for entry in no_proxy.split(","):
        name = entry.strip().lstrip(".").lower()
        if not name:
            continue
        if name in (host, with_port) or host.endswith("." + name) or with_port.endswith("." + name):
            return True
    return False


def _ssl_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """The trust httpx gave provider requests (``httpx.create_ssl_context``)."""
    if env.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
    if env.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=env["SSL_CERT_DIR"])
    return ssl.create_default_context(cafile=certifi.where())


async def _sent(*_: object) -> None:
    note_sent()


def _sent_trace() -> aiohttp.TraceConfig:
    """Tells a caller watching for it (``call_stats.watch_sent``) that the request is written:
    its body went out (adapters send it in one piece), or a new connection must be opened first
    (then not worth waiting for)."""
    config = aiohttp.TraceConfig()
    config.on_request_chunk_sent.append(_sent)
    config.on_connection_create_start.append(_sent)
    return config


class ProviderHTTP:
    """The shared session (``session()``), the route to each provider URL (``route()``) and
    the request tracing of ``trace_configs`` (the observability room's, when traces are on)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        trace_configs: Sequence[aiohttp.TraceConfig] = (),
        allow_private_hosts: bool = False,
    ) -> None:
        """``allow_private_hosts``: whether loopback and private addresses may be reached
        (``app.providers.destinations``; link-local and metadata addresses never are)."""
        self._env: Mapping[str, str] = {} if env is None else env
        self.allow_private_hosts = allow_private_hosts
        self._trace_configs = [_sent_trace(), *trace_configs]
        self._session: aiohttp.ClientSession | None = None
        self._routes: dict[str, Route] = {}

    def session(self) -> aiohttp.ClientSession:
        """The session, made on the first call (which must run in the event loop)."""
        session = self._session
        if session is None:
            asyncio.get_running_loop()  # fail here, not inside aiohttp, outside a loop
            connector = aiohttp.TCPConnector(
                ssl=_ssl_context(self._env),
                limit=_MAX_CONNECTIONS,
                keepalive_timeout=_KEEPALIVE_SECONDS,
                # Every address a provider's host name resolves to is checked before a
                # connection is made (a literal address is checked by the adapter).
                resolver=GuardedResolver(allow_private=self.allow_private_hosts),
            )
            session = self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=_SESSION_TIMEOUT,
                trust_env=False,
                trace_configs=self._trace_configs,
            )
        return session

    def route(self, url: str) -> Route:
        """The route of ``url`` (read from the environment once per URL)."""
        route = self._routes.get(url)
        if route is None:
            route = self._routes[url] = env_route(url, self._env)
        return route

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
