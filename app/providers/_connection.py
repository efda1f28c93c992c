"""What to say when the connection to a provider fails: where it went and why, in words.

An operator reading ``server_error`` in a failed turn needs the address the adapter dialled (to
spot a wrong ``base_url`` or a provider that is down) and the cause as the system named it
("connection refused", "name or service not known"), not the exception's class alone. The URL is
printed without credentials (``base_url`` cannot carry any, ``app.providers.urls``; stripped here
anyway so a future path cannot leak one) and without its query.
"""

from __future__ import annotations

import errno
import os
import ssl
from urllib.parse import urlsplit, urlunsplit

import aiohttp

__all__ = ["connection_failure", "printable_url"]


def printable_url(url: str) -> str:
    """``url`` without user, password, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unreadable URL)"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _os_cause(error: OSError) -> str:
    # ``strerror`` of a refused connect is the C library's "Connection refused"; aiohttp wraps it
    # as "Connect call failed ('127.0.0.1', 9)", which names neither the cause nor a fix.
    if error.errno is not None and error.errno in errno.errorcode and error.errno > 0:
        return os.strerror(error.errno).lower()
    text = error.strerror or str(error)
    return " ".join(text.split()).lower() or type(error).__name__


def _cause(exc: aiohttp.ClientError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "its TLS certificate could not be verified"
    if isinstance(exc, aiohttp.ClientConnectorSSLError) or isinstance(
        getattr(exc, "os_error", None), ssl.SSLError
    ):
        return "the TLS handshake failed"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"its host name did not resolve ({_os_cause(exc.os_error)})"
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return f"the proxy refused the connection ({_os_cause(exc.os_error)})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return _os_cause(exc.os_error)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the provider closed the connection before answering"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the answer ended before it was complete"
    if isinstance(exc, aiohttp.ClientOSError):
        return _os_cause(exc)
    text = " ".join(str(exc).split())
    return text or "the connection broke"


def connection_failure(url: str, exc: aiohttp.ClientError) -> str:
    """A ``detail``: "the connection to the provider at URL failed: CAUSE (ExceptionClass)"."""
    return (
        f"the connection to the provider at {printable_url(url)} failed: {_cause(exc)} "
        f"({type(exc).__name__})"
    )
