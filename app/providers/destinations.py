"""Where a model's ``base_url`` may send requests (``docs/security.md``, "Outbound requests").

A registered model makes the service send HTTP requests to the host its caller chose: without a
rule that is a server-side request forgery (a cloud metadata service, a database port on the
service's own host). The rule, applied to every address a connection would use:

- **always refused**: link-local (``169.254.0.0/16``, ``fe80::/10``: cloud metadata lives there),
  the known metadata addresses (``fd00:ec2::254``, Alibaba's ``100.100.100.200``), unspecified,
  multicast, broadcast and reserved addresses, and the metadata host names;
- **refused unless ``CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS``**: loopback (``localhost`` too) and
  private ranges (RFC 1918, CGNAT ``100.64.0.0/10``, IPv6 unique-local ``fc00::/7``) — a model
  server on the same host or network is a real use, so an operator can allow it;
- anything else (public addresses) is allowed.

It is checked twice: when a model is registered (a literal address or a known name in the URL:
422 ``base_url_not_allowed``, nothing stored) and when a connection is made, on the addresses
the host name resolves to (``GuardedResolver``), so a name that resolves to a refused address
(or changes to one later: DNS rebinding) is refused too. Through a proxy
(``HTTPS_PROXY``), the connection goes to the proxy, which must apply its own egress rules.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

__all__ = ["DestinationRefused", "GuardedResolver", "address_problem", "host_problem"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class DestinationRefused(OSError):
    """A connection the rule refuses (raised by the resolver, so aiohttp never connects)."""


def _plain(address: IPAddress) -> IPAddress:
    # ``::ffff:127.0.0.1`` and ``::127.0.0.1``-style spellings are the IPv4 address they carry.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_problem(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why a connection to ``address`` is refused (a clause completing "the address …"), or
    ``None`` when it is allowed."""
    address = _plain(address)
    if address in _METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address, never a model server"
    if address.is_link_local:
        return f"{address} is link-local (where cloud metadata services live)"
    # Loopback before the reserved ranges: IPv6's ``::1`` lies in the reserved ``::/8``.
    reserved = address.is_reserved and not address.is_loopback
    if address.is_unspecified or address.is_multicast or reserved:
        return f"{address} is not an address a model server can have"
    private = address.is_loopback or address.is_private or address in _CGNAT
    if private and not allow_private:
        what = "loopback" if address.is_loopback else "private"
        return (
            f"{address} is a {what} address; set CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS=true to let "
            "models reach this host and private networks"
        )
    return None


def host_problem(host: str, *, allow_private: bool) -> str | None:
    """Why ``host`` (a URL's host: a name or a literal address) is refused before any lookup,
    or ``None`` when nothing can be said without resolving it."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        literal = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        return address_problem(literal, allow_private=allow_private)
    if name in _METADATA_NAMES:
        return f"{host} is a cloud metadata host, never a model server"
    if (name in _LOOPBACK_NAMES or name.endswith(".localhost")) and not allow_private:
        return (
            f"{host} is this host (loopback); set CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS=true to let "
            "models reach this host and private networks"
        )
    return None


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, refusing names that resolve to any refused address: every address a
    connection could use is checked, not just the first."""

    def __init__(self, *, allow_private: bool, resolver: AbstractResolver | None = None) -> None:
        self._allow_private = allow_private
        self._resolver = resolver or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        problem = host_problem(host, allow_private=self._allow_private)
        if problem is not None:
            raise DestinationRefused(problem)
        results = await self._resolver.resolve(host, port, family)
        for result in results:
            problem = address_problem(
                ipaddress.ip_address(result["host"].split("%", 1)[0]),
                allow_private=self._allow_private,
            )
            if problem is not None:
                raise DestinationRefused(f"{host} resolves to {problem}")
        return results

    async def close(self) -> None:
        await self._resolver.close()
