"""``load_settings``: what an operator reads when a setting is wrong, wherever it came from.

Real processes print these lines (``tests/ops/test_startup.py``); here the cases that need no
process: several bad variables at once, a ``.env`` file, values people write in any case.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.settings import ConfigError, load_settings


@pytest.fixture(autouse=True)
def no_settings_from_the_developer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [n for n in os.environ if n.startswith("CTXSVC_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env from the checkout


def test_each_bad_variable_gets_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSVC_MAX_BODY_BYTES", "lots")
    monkeypatch.setenv("CTXSVC_SUMMARY_ATTEMPTS", "0")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert refused.value.lines == [
        "CTXSVC_MAX_BODY_BYTES must be a number of bytes greater than 0; got 'lots'",
        "CTXSVC_SUMMARY_ATTEMPTS must be a whole number, 1 or more; got '0'",
    ]


def test_a_dotenv_value_is_reported_by_its_variable(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text('CTXSVC_WORKSPACE_ROOTS=["relative/dir"]\n')
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert refused.value.lines == [
        'CTXSVC_WORKSPACE_ROOTS must be a JSON list of absolute paths, like ["/srv/work"]; '
        "got '[\"relative/dir\"]' (workspace root 'relative/dir' must be an absolute path)"
    ]


def test_weak_production_keys_are_counted_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSVC_ENVIRONMENT", "production")
    monkeypatch.setenv("CTXSVC_API_KEYS", '["changeme", "k-7f3a9c1e5b2d4f60a8c1"]')
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert refused.value.lines == [
        "CTXSVC_ENVIRONMENT=production refuses placeholder or short (< 16 chars) API keys: 1 of "
        "the 2 in CTXSVC_API_KEYS"
    ]
    assert "changeme" not in str(refused.value)


def test_names_people_write_in_any_case_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSVC_LOG_LEVEL", "debug")
    monkeypatch.setenv("CTXSVC_ENVIRONMENT", "Development")
    monkeypatch.setenv("CTXSVC_DATABASE_URL", "sqlite:///here.db")
    monkeypatch.setenv("CTXSVC_API_KEYS", "")  # empty means none, as the default
    settings = load_settings()
    assert (settings.log_level, settings.environment) == ("DEBUG", "development")
    assert settings.database_url == "sqlite+aiosqlite:///here.db"
    assert settings.api_keys == []


@pytest.mark.parametrize(("value", "taken"), [("4096", 4096), ("4095", None), ("65536", 65536)])
def test_the_header_limit_leaves_room_for_a_real_request(
    monkeypatch: pytest.MonkeyPatch, value: str, taken: int | None
) -> None:
    monkeypatch.setenv("CTXSVC_MAX_HEADER_BYTES", value)
    if taken is not None:
        assert load_settings().max_header_bytes == taken
        return
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert refused.value.lines == [
        "CTXSVC_MAX_HEADER_BYTES must be a number of bytes, at least 4096; got '4095'"
    ]


def test_the_header_limit_defaults_to_64_kib() -> None:
    assert load_settings().max_header_bytes == 64 * 1024
