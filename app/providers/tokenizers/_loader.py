"""Loading an encoding without the network: find its file, verify it, build tiktoken from it.

Order of sources for one encoding:

1. ``data_dir/<name>.tiktoken`` when a data directory is given (``CTXSVC_TOKENIZER_DIR``) and
   holds that file. A file that is present but does not verify is refused outright — never
   silently replaced by another source — because it means the file was altered or misplaced.
2. Otherwise the copy shipped with the package, ``app/providers/tokenizers/data/<name>.tiktoken``
   (OpenAI's published file byte for byte, MIT-licensed: see ``data/LICENSE``).

Every file is checked against its published SHA-256 before a single rank is parsed. The
``tiktoken.Encoding`` is then built directly from those ranks, so tiktoken's own loader (which
downloads and caches blobs) is never called. Encodings are built lazily, once per process and
data directory, under a lock so that concurrent first requests do not build twice;
``tiktoken.Encoding`` itself is safe to share across threads (its Rust core keeps per-thread
regex state).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from pathlib import Path
from typing import Final

import tiktoken

from app.core.errors import InvalidInput, Unavailable
from app.providers.tokenizers._specs import ENCODINGS, EncodingSpec

__all__ = [
    "DATA_INVALID",
    "DATA_MISSING",
    "SHIPPED_DIR",
    "clear_cache",
    "encoding_file_bytes",
    "encoding_spec",
    "load_encoding",
]

DATA_INVALID = "tokenizer_data_invalid"
DATA_MISSING = "tokenizer_data_missing"

# The vocabularies that ship inside the package (package data of ``app``).
SHIPPED_DIR: Final = Path(__file__).resolve().parent / "data"

_lock = threading.Lock()
_cache: dict[tuple[str, Path | None], tiktoken.Encoding] = {}


def encoding_spec(name: str) -> EncodingSpec:
    """The spec of a supported encoding (``o200k_base`` or ``cl100k_base``)."""
    try:
        return ENCODINGS[name]
    except KeyError:
        raise InvalidInput(
            "unknown_token_counter",
            f"no tiktoken encoding named {name!r}; supported: {', '.join(sorted(ENCODINGS))}",
        ) from None


def _verify(spec: EncodingSpec, data: bytes, origin: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise Unavailable(
            DATA_INVALID,
            f"{spec.file_name} from {origin} has SHA-256 {digest}, not the published "
            f"{spec.sha256}; refusing to count with it. Replace it with the file OpenAI "
            "publishes, or unset CTXSVC_TOKENIZER_DIR to use the copies ctxsvc ships.",
            encoding=spec.name,
            source=origin,
        )
    return data


def encoding_file_bytes(
    name: str, data_dir: Path | None = None, *, shipped: Path | None = SHIPPED_DIR
) -> bytes:
    """The exact, verified ``<name>.tiktoken`` bytes, from ``data_dir`` or the shipped copy.

    Raises ``Unavailable`` with code ``tokenizer_data_invalid`` when the file found does not
    verify, or ``tokenizer_data_missing`` when neither directory holds it. Never touches the
    network. ``shipped=None`` leaves the shipped copy out (tests of a bare data directory).
    """
    spec = encoding_spec(name)
    candidates = [d / spec.file_name for d in (data_dir, shipped) if d is not None]
    for path in candidates:
        if path.is_file():
            return _verify(spec, path.read_bytes(), str(path))
    where = " nor ".join(str(path) for path in candidates) or "no directory"
    raise Unavailable(
        DATA_MISSING,
        f"no data for {spec.name}: {where} holds it (reinstall ctxsvc: the package ships it)",
        encoding=spec.name,
    )


def _parse_ranks(spec: EncodingSpec, data: bytes) -> dict[bytes, int]:
    # Same format tiktoken.load.load_tiktoken_bpe reads: "<base64 token> <rank>" per line.
    try:
        return {
            base64.b64decode(token, validate=True): int(rank)
            for token, rank in (line.split() for line in data.splitlines() if line)
        }
    except (ValueError, binascii.Error) as exc:  # unreachable for verified data; kept honest
        raise Unavailable(DATA_INVALID, f"{spec.file_name} does not parse: {exc}") from exc


def _build(spec: EncodingSpec, data: bytes) -> tiktoken.Encoding:
    return tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(spec, data),
        special_tokens=dict(spec.special_tokens),
    )


def load_encoding(name: str, data_dir: Path | None = None) -> tiktoken.Encoding:
    """The verified encoding ``name``, built on first use and cached per process."""
    key = (name, data_dir.resolve() if data_dir is not None else None)
    with _lock:
        encoding = _cache.get(key)
        if encoding is None:
            encoding = _build(encoding_spec(name), encoding_file_bytes(name, data_dir))
            _cache[key] = encoding
        return encoding


def clear_cache() -> None:
    """Forget every built encoding (tests use it to load from scratch)."""
    with _lock:
        _cache.clear()
