"""The adapters' HTTP client (``app.providers.http_client``) over real loopback connections:
proxies and trusted certificates from the environment, failures of the connection itself, a
cancelled call, and bodies of any size."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trustme

from app.providers._connection import printable_url
from app.providers.base import ProviderConfig, ProviderError, RetryPolicy, Timeouts
from app.providers.call_stats import collecting, stop_collecting
from app.providers.http_client import DIRECT, ProviderHTTP, Route, env_route
from app.providers.openai_chat import OpenAIChatClient
from tests.providers.encoding.requests import msg, prepared, text
from tests.providers.fakes import (
    ErrorReply,
    FakeProviderServer,
    RecordingSink,
    StreamReply,
    openai_stream,
)

pytestmark = pytest.mark.anyio

KEY_ENV = "TEST_OPENAI_KEY"
KEY = "sk-http-client-test"


def adapter(
    http: ProviderHTTP, base_url: str, *, timeouts: Timeouts | None = None
) -> OpenAIChatClient:
    return OpenAIChatClient(
        http,
        ProviderConfig("openai_chat", base_url + "/v1", "gpt-test", KEY_ENV),
        env={KEY_ENV: KEY},
        retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05),
        timeouts=timeouts or Timeouts(first_byte=10, idle=10, total=30),
    )


@pytest.fixture
async def client_of() -> AsyncIterator[list[ProviderHTTP]]:
    """Clients made by a test with its own environment, all closed after it."""
    made: list[ProviderHTTP] = []
    yield made
    for http in made:
        await http.aclose()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def hello() -> dict[str, object]:
    return prepared(msg("user", text("hello")))


# -- proxies ----------------------------------------------------------------------------------


async def test_requests_go_through_the_proxy_the_environment_names(
    fake_server: FakeProviderServer, client_of: list[ProviderHTTP]
) -> None:
    # The fake answers as the proxy would forward: an http:// provider is asked through it
    # with the absolute URL, and the proxy's credentials come as Proxy-Authorization.
    proxy = f"http://ops:s%3Acret@127.0.0.1:{fake_server.port}"
    http = ProviderHTTP(allow_private_hosts=True, env={"HTTP_PROXY": proxy})
    client_of.append(http)
    fake_server.enqueue(StreamReply(openai_stream(text=["via the proxy"])))
    response = await adapter(http, "http://provider.invalid").complete(hello())
    assert response.text == "via the proxy"
    [sent] = fake_server.requests
    assert sent.path == "http://provider.invalid/v1/chat/completions"
    assert sent.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"ops:s:cret").decode(
        "ascii"
    )
    assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_no_proxy_sends_a_request_straight_to_the_provider(
    fake_server: FakeProviderServer, client_of: list[ProviderHTTP]
) -> None:
    unreachable = f"http://127.0.0.1:{closed_port()}"
    http = ProviderHTTP(
        allow_private_hosts=True, env={"HTTP_PROXY": unreachable, "NO_PROXY": "localhost,127.0.0.1"}
    )
    client_of.append(http)
    fake_server.enqueue(StreamReply(openai_stream(text=["direct"])))
    assert (await adapter(http, fake_server.base_url).complete(hello())).text == "direct"
    assert fake_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("url", "env", "route"),
    [
        ("https://api.openai.com/v1", {}, DIRECT),
        ("https://api.openai.com/v1", {"HTTPS_PROXY": "http://p:3128"}, Route("http://p:3128")),
        # Only the scheme's own variable, else ALL_PROXY.
        ("https://api.openai.com/v1", {"HTTP_PROXY": "http://p:3128"}, DIRECT),
        ("http://10.0.0.5:8000/v1", {"ALL_PROXY": "http://p:3128"}, Route("http://p:3128")),
        # The lower-case variable wins, even empty; a proxy without a scheme is http://.
        ("https://a.example/v1", {"https_proxy": "p:1", "HTTPS_PROXY": "q:2"}, Route("http://p:1")),
        ("https://a.example/v1", {"https_proxy": "", "HTTPS_PROXY": "http://q:2"}, DIRECT),
        # HTTP_PROXY is not trusted under CGI (a request header could set it: "httpoxy").
        ("http://a.example/v1", {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"}, DIRECT),
        # NO_PROXY: a host, a domain and its sub-domains, host:port, or everything.
        (
            "https://api.example.com/v1",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"},
            DIRECT,
        ),
        (
            "https://example.com/v1",
            {"HTTPS_PROXY": "http://p:1", "no_proxy": "example.com"},
            DIRECT,
        ),
        ("http://h:8000/v1", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "h:8000"}, DIRECT),
        ("http://h:8000/v1", {"HTTP_PROXY": "http://p:1", "NO_PROXY": "*"}, DIRECT),
        (
            "https://notexample.com/v1",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"},
            Route("http://p:1"),
        ),
    ],
)
def test_the_environment_decides_the_route(url: str, env: dict[str, str], route: Route) -> None:
    assert env_route(url, env) == route


def test_proxy_credentials_are_taken_out_of_the_url() -> None:
    login = {"Proxy-Authorization": "Basic " + base64.b64encode(b"a@b:p:w").decode("ascii")}
    proxy = "http://a%40b:p%3Aw@proxy:8080"
    # To an https:// provider they open the tunnel (CONNECT) ...
    tunnel = env_route("https://x.example/v1", {"HTTPS_PROXY": proxy})
    assert (tunnel.proxy, tunnel.proxy_headers, tunnel.headers) == (
        "http://proxy:8080",
        login,
        None,
    )
    # ... to an http:// one they come with each request.
    plain = env_route("http://x.example/v1", {"HTTP_PROXY": proxy})
    assert (plain.proxy, plain.proxy_headers, plain.headers) == ("http://proxy:8080", None, login)


@pytest.mark.parametrize(
    ("proxy", "says"),
    [
        ("http://[::1", "is not a valid URL (Invalid IPv6 URL)"),
        ("http://proxy:65536", "is not a valid URL (Port out of range 0-65535)"),
        ("socks5://proxy:1080", "is not an absolute http:// or https:// URL with a host"),
        ("http://", "is not an absolute http:// or https:// URL with a host"),
        ("http://proxy:0", "names port 0"),
        ("proxy host:8080", "contains whitespace or control characters"),
    ],
)
async def test_a_proxy_aiohttp_cannot_use_fails_each_call_before_sending(
    client_of: list[ProviderHTTP], fake_server: FakeProviderServer, proxy: str, says: str
) -> None:
    # These used to fail the adapter's creation (a 500 on the turn's start) or end in aiohttp's
    # own error after two retries.
    http = ProviderHTTP(allow_private_hosts=True, env={"HTTP_PROXY": proxy})
    client_of.append(http)
    with pytest.raises(ProviderError) as failed:
        await adapter(http, fake_server.base_url).complete(hello())
    assert failed.value.code == "bad_request"
    assert not failed.value.retryable
    assert failed.value.detail == (
        f"cannot call model gpt-test: the proxy the environment names for http:// URLs {says}; "
        "fix HTTP_PROXY / HTTPS_PROXY / ALL_PROXY where ctxsvc runs and restart"
    )
    assert fake_server.requests == []
    # A proxy at the highest port is taken as given.
    assert env_route("http://x.example/v1", {"HTTP_PROXY": "http://proxy:65535"}) == Route(
        "http://proxy:65535"
    )


# -- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(authority: trustme.CA) -> Iterator[FakeProviderServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    with FakeProviderServer(tls=context) as server:
        yield server


async def test_a_certificate_nobody_trusts_is_refused(
    tls_server: FakeProviderServer, client_of: list[ProviderHTTP]
) -> None:
    http = ProviderHTTP(allow_private_hosts=True, env={})
    client_of.append(http)
    with pytest.raises(ProviderError) as caught:
        await adapter(http, tls_server.base_url).complete(hello())
    assert caught.value.code == "server_error"
    assert "Certificate" in caught.value.detail
    assert tls_server.requests == []  # nothing was sent over the unverified connection


async def test_ssl_cert_file_names_the_certificates_to_trust(
    tls_server: FakeProviderServer,
    authority: trustme.CA,
    tmp_path: Path,
    client_of: list[ProviderHTTP],
) -> None:
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    http = ProviderHTTP(allow_private_hosts=True, env={"SSL_CERT_FILE": str(bundle)})
    client_of.append(http)
    tls_server.enqueue(StreamReply(openai_stream(text=["over TLS"])))
    assert (await adapter(http, tls_server.base_url).complete(hello())).text == "over TLS"


# -- the connection itself ----------------------------------------------------------------------


async def test_a_refused_connection_is_a_server_error_retried_to_the_last_attempt(
    http: ProviderHTTP,
) -> None:
    stats, token = collecting()
    port = closed_port()
    try:
        with pytest.raises(ProviderError) as caught:
            await adapter(http, f"http://127.0.0.1:{port}").complete(hello())
    finally:
        stop_collecting(token)
    assert caught.value.code == "server_error"
    # Where it dialled and why it failed, in the system's words.
    assert caught.value.detail == (
        f"the connection to the provider at http://127.0.0.1:{port}/v1/chat/completions failed: "
        "connection refused (ClientConnectorError)"
    )
    assert (stats.attempts, stats.retried) == (3, ["server_error", "server_error"])


async def test_a_connection_closed_without_an_answer_is_retried(http: ProviderHTTP) -> None:
    closed = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal closed
        await reader.readuntil(b"\r\n\r\n")
        closed += 1
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ProviderError) as caught:
            await adapter(http, f"http://127.0.0.1:{port}").complete(hello())
    finally:
        server.close()
        await server.wait_closed()
    assert caught.value.code == "server_error"
    assert caught.value.detail == (
        f"the connection to the provider at http://127.0.0.1:{port}/v1/chat/completions failed: "
        "the provider closed the connection before answering (ServerDisconnectedError)"
    )
    assert caught.value.semantic_output_received is False
    assert closed == 3


async def test_a_host_that_does_not_resolve_is_named_with_its_cause(http: ProviderHTTP) -> None:
    # ``.invalid`` never resolves (RFC 6761); the resolver answers at once, offline too.
    with pytest.raises(ProviderError) as caught:
        await adapter(http, "http://provider.invalid:8080").complete(hello())
    assert caught.value.code == "server_error"
    assert caught.value.detail.startswith(
        "the connection to the provider at http://provider.invalid:8080/v1/chat/completions "
        "failed: its host name did not resolve ("
    ), caught.value.detail


def test_the_printed_url_never_carries_credentials_or_a_query() -> None:
    assert (
        printable_url("https://user:s3cret@api.example.com:8443/v1/chat?key=k-123#x")
        == "https://api.example.com:8443/v1/chat"
    )
    assert printable_url("http://[::1]:9/v1") == "http://[::1]:9/v1"


async def test_a_redirect_is_not_followed(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(ErrorReply(307, {}, headers={"location": "http://elsewhere.invalid/"}))
    with pytest.raises(ProviderError) as caught:
        await adapter(http, fake_server.base_url).complete(hello())
    assert (caught.value.code, caught.value.status) == ("bad_request", 307)
    assert len(fake_server.requests) == 1


async def test_a_cancelled_call_closes_its_request_mid_stream(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    # The first event carries text, the next one would come a minute later.
    fake_server.enqueue(StreamReply(openai_stream(text=["first", "never"])[1:], event_delay=60))
    shown = asyncio.Event()

    class Sink(RecordingSink):
        async def on_text_delta(self, text: str) -> None:
            await super().on_text_delta(text)
            shown.set()

    call = asyncio.ensure_future(adapter(http, fake_server.base_url).complete(hello(), sink=Sink()))
    await asyncio.wait_for(shown.wait(), 30)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    # The provider sees the request closed: it stops generating (and billing) the answer.
    await fake_server.abandoned_by_client(1)


async def test_a_body_over_a_mebibyte_is_sent_exactly_as_encoded(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    request = prepared(msg("user", text("ä" * 1_500_000)))
    client = adapter(http, fake_server.base_url)
    fake_server.enqueue(StreamReply(openai_stream(text=["read it"])))
    assert (await client.complete(request)).text == "read it"
    [sent] = fake_server.requests
    assert len(sent.body) > 2**20
    assert sent.body == client.body(request)


async def test_each_provider_request_is_a_debug_line(
    fake_server: FakeProviderServer, http: ProviderHTTP, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.enqueue(*(StreamReply(openai_stream(text=["hi"])) for _ in range(2)))
    client = adapter(http, fake_server.base_url)
    with caplog.at_level(logging.INFO, logger="app.providers._streaming"):
        await client.complete(hello())
    assert caplog.messages == []  # nothing per request at the default level
    with caplog.at_level(logging.DEBUG, logger="app.providers._streaming"):
        await client.complete(hello())
    assert caplog.messages == [
        f"provider request: POST {fake_server.base_url}/v1/chat/completions: HTTP 200"
    ]
