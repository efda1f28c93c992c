"""Each encoding is built once per test session: by our loader, and by tiktoken's own code."""

from __future__ import annotations

import hashlib

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public  # type: ignore[import-untyped]

from app.providers.tokenizers import TiktokenCounter, encoding_file_bytes, get_counter
from tests.providers.tokenizers.support import ENCODING_NAMES, NetworkGuard

# Where tiktoken's own constructors would download from; tiktoken caches under sha1(url).
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@pytest.fixture(scope="session")
def counters() -> dict[str, TiktokenCounter]:
    built: dict[str, TiktokenCounter] = {}
    for name in ENCODING_NAMES:
        counter = get_counter(f"tiktoken:{name}")
        assert isinstance(counter, TiktokenCounter)
        built[name] = counter
    return built


@pytest.fixture(scope="session")
def reference_encodings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    """The encodings as tiktoken's own ``openai_public`` constructors build them.

    Their files are pre-seeded in a private tiktoken cache (network blocked meanwhile), so this
    is an independent check of our split patterns and special tokens, not a copy of them.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ENCODING_NAMES:
        key = hashlib.sha1(_BLOB_URL.format(name).encode()).hexdigest()
        (cache / key).write_bytes(encoding_file_bytes(name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        guard = NetworkGuard().install(mp)
        built = {
            name: tiktoken.Encoding(**getattr(openai_public, name)()) for name in ENCODING_NAMES
        }
    assert guard.attempts == []
    return built


@pytest.fixture(params=ENCODING_NAMES)
def encoding_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def counter(counters: dict[str, TiktokenCounter], encoding_name: str) -> TiktokenCounter:
    return counters[encoding_name]


@pytest.fixture
def reference(
    reference_encodings: dict[str, tiktoken.Encoding], encoding_name: str
) -> tiktoken.Encoding:
    return reference_encodings[encoding_name]
