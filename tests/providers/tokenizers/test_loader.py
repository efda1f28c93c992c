"""Encoding data: verified against the published SHA-256, never downloaded, refused if altered."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path

import pytest

from app.core.errors import Unavailable
from app.providers.tokenizers import (
    DATA_INVALID,
    DATA_MISSING,
    TiktokenCounter,
    clear_cache,
    encoding_file_bytes,
    get_counter,
)
from app.providers.tokenizers._loader import load_encoding
from app.providers.tokenizers._sources import (
    PACKAGE_SOURCES,
    MalformedSourceError,
    PackageSource,
    quicktok_vocab_to_tiktoken,
)
from tests.providers.tokenizers.support import ENCODING_NAMES, NetworkGuard, write_baked

# Published by OpenAI (tiktoken_ext/openai_public.py).
PUBLISHED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def verified() -> dict[str, bytes]:
    return {name: encoding_file_bytes(name) for name in ENCODING_NAMES}


def _tampered(data: bytes) -> bytes:
    # Change one byte in the middle of a base64 token (still a parseable file).
    middle = len(data) // 2
    while data[middle : middle + 1] in (b" ", b"\n") or data[middle : middle + 1].isdigit():
        middle += 1
    flipped = b"A" if data[middle : middle + 1] != b"A" else b"B"
    return data[:middle] + flipped + data[middle + 1 :]


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_installed_packages_yield_the_published_file(name: str, verified: dict[str, bytes]) -> None:
    assert hashlib.sha256(verified[name]).hexdigest() == PUBLISHED_SHA256[name]


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_every_installed_source_agrees(name: str, verified: dict[str, bytes]) -> None:
    offered = [source.read() for source in PACKAGE_SOURCES[name]]
    assert [data for data in offered if data is not None] == [verified[name]] * len(offered)


def test_counting_from_scratch_opens_no_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = NetworkGuard().install(monkeypatch)
    clear_cache()
    for name in ENCODING_NAMES:
        counter = get_counter(f"tiktoken:{name}")
        assert isinstance(counter, TiktokenCounter)
        assert counter.count_text("2 + 2 = 4") == 7  # cookbook figure for both encodings
    assert guard.attempts == []


@pytest.mark.parametrize("name", ENCODING_NAMES)
def test_tampered_baked_file_is_refused(
    name: str, verified: dict[str, bytes], tmp_path: Path
) -> None:
    write_baked(tmp_path, name, _tampered(verified[name]))
    with pytest.raises(Unavailable) as caught:
        get_counter(f"tiktoken:{name}", data_dir=tmp_path)
    assert caught.value.code == DATA_INVALID
    assert PUBLISHED_SHA256[name] in caught.value.detail


def test_baked_file_is_used_without_any_package(verified: dict[str, bytes], tmp_path: Path) -> None:
    write_baked(tmp_path, "o200k_base", verified["o200k_base"])
    data = encoding_file_bytes("o200k_base", tmp_path, sources={})
    assert data == verified["o200k_base"]


def test_missing_data_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Unavailable) as caught:
        encoding_file_bytes("cl100k_base", tmp_path, sources={})
    assert caught.value.code == DATA_MISSING
    assert "cl100k_base.tiktoken" in caught.value.detail


def test_installed_package_with_altered_data_is_refused() -> None:
    altered = PackageSource("quicktok-v1", "quicktok/data/o200k.vocab", _altered_quicktok)
    with pytest.raises(Unavailable) as caught:
        encoding_file_bytes("o200k_base", sources={"o200k_base": (altered,)})
    assert caught.value.code == DATA_INVALID
    assert "quicktok-v1" in caught.value.detail


def _altered_quicktok(raw: bytes) -> bytes:
    return _tampered(quicktok_vocab_to_tiktoken(raw))


def test_truncated_quicktok_vocab_is_malformed() -> None:
    with pytest.raises(MalformedSourceError):
        quicktok_vocab_to_tiktoken(b"\x02\x00\x00\x00\x01\x00a")


def test_concurrent_first_loads_share_one_encoding() -> None:
    clear_cache()
    barrier = threading.Barrier(4)
    loaded: list[object] = []

    def load() -> None:
        barrier.wait()
        loaded.append(load_encoding("cl100k_base"))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loaded) == 4
    assert all(encoding is loaded[0] for encoding in loaded)


def test_bake_script_writes_files_the_loader_accepts(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bake", REPO / "scripts" / "bake_encodings.py")
    assert spec is not None
    assert spec.loader is not None
    bake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bake)

    assert bake.main([str(tmp_path / "tok")]) == 0
    for name in ENCODING_NAMES:
        baked = (tmp_path / "tok" / f"{name}.tiktoken").read_bytes()
        assert hashlib.sha256(baked).hexdigest() == PUBLISHED_SHA256[name]
        assert encoding_file_bytes(name, tmp_path / "tok", sources={}) == baked
