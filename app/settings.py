"""One Settings object, read once (environment variables ``CTXSVC_*`` or a ``.env`` file).

Each field's ``description`` says what the variable must be, in words that finish the sentence
"CTXSVC_X must be …": a misconfiguration is reported as one such line per variable by
``load_settings`` (``ConfigError``), so an operator never reads a validation traceback.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from app.storage.urls import DATABASE_URL_FORMS, async_database_url, redacted_url

__all__ = [
    "ConfigError",
    "Settings",
    "default_settings",
    "load_settings",
    "misspelt_variables",
    "settings_or_exit",
]

ENV_PREFIX = "CTXSVC_"

# Keys that are obviously examples; refused in production so a copied sample config fails loudly.
_PLACEHOLDER_KEYS = frozenset({"", "changeme", "change-me", "secret", "test", "example", "key"})
_MIN_PRODUCTION_KEY_LENGTH = 16

_SECONDS = "a number of seconds greater than 0"
_SWITCH = "true or false"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", frozen=True
    )

    environment: Literal["development", "production"] = Field(
        default="development", description="development or production"
    )
    # Any form of ``app.storage.urls``; stored as the async form the engine needs.
    database_url: str = Field(
        default="sqlite+aiosqlite:///./data/ctxsvc.db",
        description=f"a database URL: {DATABASE_URL_FORMS}",
    )
    # Migrate the database to head on start-up (the embedded default needs no other setup).
    migrate_on_start: bool = Field(default=True, description=_SWITCH)
    # Lists are JSON; NoDecode lets ``_json_list`` read them, so a malformed value gets this
    # field's sentence like any other error (pydantic-settings' own decoding names no variable).
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description='a JSON list of keys, like ["a-long-random-key"]'
    )
    # ``/metrics`` takes the API keys like every /v1 route (route names, latencies and pool state
    # are not for everyone); true makes it public for a scraper on a private network.
    metrics_public: bool = Field(default=False, description=_SWITCH)
    workspace_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description='a JSON list of absolute paths, like ["/srv/work"]'
    )
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="a number of bytes greater than 0"
    )
    # The request line and headers, bounded by the HTTP protocol ``ctxsvc serve`` runs
    # (``app.api.http_protocol``): 431 ``headers_too_large`` above it.
    max_header_bytes: int = Field(
        default=64 * 1024, ge=4096, description="a number of bytes, at least 4096"
    )
    tokenizer_dir: Path | None = Field(default=None, description="a directory path")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="one of DEBUG, INFO, WARNING, ERROR"
    )
    # Structured JSON logs on stderr, configured at start-up (tests keep pytest's handlers).
    json_logs: bool = Field(default=True, description=_SWITCH)
    # Turn runner
    turn_lease_seconds: float = Field(default=30.0, gt=0, description=_SECONDS)
    # How often a runner checks for a cancel request posted to another replica (the lease is
    # renewed at a third of its duration from the same loop).
    turn_watch_interval_seconds: float = Field(default=1.0, gt=0, description=_SECONDS)
    # How often each process interrupts turns whose runner's lease expired (spec §6).
    turn_reaper_interval_seconds: float = Field(default=10.0, gt=0, description=_SECONDS)
    # Longest ``?wait=true`` (and cancel) answer time before the current state is returned.
    turn_wait_timeout_seconds: float = Field(default=60.0, gt=0, description=_SECONDS)
    # How long a turn waits for the caller's tool results before it ends (``failed``,
    # ``tool_results_timeout``); a session's agent may set its own.
    tool_results_timeout_seconds: float = Field(default=3600.0, gt=0, description=_SECONDS)
    # Process memory a process spends on its sessions' contexts (the last Conversation read, the
    # last call prepared from it, its messages' encoded JSON), so the next prepare or turn
    # decodes, walks and encodes only what was stored since (0: nothing is kept); estimated
    # by ``conversation_cache.process_bytes``.
    conversation_cache_bytes: int = Field(
        default=768 * 1024 * 1024, ge=0, description="a number of bytes, 0 or more"
    )
    # Live updates: how often a stream re-reads the event log (other replicas' events), and
    # the comment-line heartbeat that keeps proxies from closing an idle stream.
    events_poll_seconds: float = Field(default=1.0, gt=0, description=_SECONDS)
    events_heartbeat_seconds: float = Field(default=15.0, gt=0, description=_SECONDS)
    provider_timeout_seconds: float = Field(default=600.0, gt=0, description=_SECONDS)
    # Compaction summary attempts (spec §7.4); overridable so tests need not wait minutes.
    summary_attempts: int = Field(default=3, ge=1, description="a whole number, 1 or more")
    summary_attempt_timeout_seconds: float = Field(default=120.0, gt=0, description=_SECONDS)
    summary_retry_delay_seconds: float = Field(
        default=3.0, ge=0, description="a number of seconds, 0 or more"
    )
    # PostgreSQL connection pool of each process (SQLite keeps its own): connections held
    # open, how many more a burst may open (closed again when returned), how long a request
    # waits for one, and the age after which a connection is replaced. Sized so that 16
    # concurrent requests plus the background loops never open connections at steady state.
    db_pool_size: int = Field(default=20, ge=1, description="a whole number, 1 or more")
    db_pool_max_overflow: int = Field(default=10, ge=0, description="a whole number, 0 or more")
    db_pool_timeout_seconds: float = Field(default=30.0, gt=0, description=_SECONDS)
    db_pool_recycle_seconds: float = Field(
        default=1800.0, description="a number of seconds (-1: never replace a connection)"
    )
    # Per-tenant rate limit (``docs/security.md``): a token bucket of this many requests, refilled
    # over the window, in each process (0: no limit, the default).
    rate_limit_requests: int = Field(default=0, ge=0, description="a whole number, 0 or more")
    rate_limit_window_seconds: float = Field(default=60.0, gt=0, description=_SECONDS)
    # Whether a registered model's base_url may reach loopback and private networks (a model
    # server on this host or the LAN). Link-local and metadata addresses are refused always
    # (``app.providers.destinations``, ``docs/security.md``).
    allow_private_model_hosts: bool = Field(default=False, description=_SWITCH)
    # Apply the measured provider/estimate ratio to estimate-based models (spec §3.4).
    apply_calibration: bool = Field(default=False, description=_SWITCH)
    # Compatible endpoints (spec §21): the model that summarizes a proxied session when it
    # reaches its compaction line (empty: the session's own model), and whether a caller may
    # send its own provider key (``X-Ctxsvc-Provider-Key``) for its requests instead of the
    # registry's (off: the header is refused).
    proxy_summary_model: str = Field(default="", description="a registered model id, or empty")
    proxy_caller_keys: bool = Field(default=False, description=_SWITCH)

    @field_validator("db_pool_recycle_seconds")
    @classmethod
    def _recycle(cls, seconds: float) -> float:
        if seconds <= 0 and seconds != -1:
            raise ValueError("give -1 or a number greater than 0")
        return seconds

    @field_validator("api_keys", "workspace_roots", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value  # given in code (tests, benchmarks): pydantic checks the type
        try:
            return json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError("it is not JSON") from None

    @field_validator("environment", "log_level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        # ``CTXSVC_LOG_LEVEL=debug`` and ``CTXSVC_ENVIRONMENT=Production`` mean what they say.
        if not isinstance(value, str):
            return value
        upper = value.strip().upper()
        return upper if upper in {"DEBUG", "INFO", "WARNING", "ERROR"} else value.strip().lower()

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, url: str) -> str:
        return async_database_url(url)

    @field_validator("workspace_roots")
    @classmethod
    def _roots_are_safe(cls, roots: list[str]) -> list[str]:
        for root in roots:
            if root.strip() in {"", "*", "/"} or "*" in root:
                raise ValueError(f"workspace root {root!r} would expose the whole filesystem")
            if not Path(root).is_absolute():
                raise ValueError(f"workspace root {root!r} must be an absolute path")
        return [str(Path(r)) for r in roots]

    @model_validator(mode="after")
    def _production_is_locked_down(self) -> Settings:
        if self.environment == "production":
            if not self.api_keys:
                raise ValueError(
                    "CTXSVC_ENVIRONMENT=production requires CTXSVC_API_KEYS: a JSON list of "
                    f"keys of {_MIN_PRODUCTION_KEY_LENGTH} characters or more"
                )
            weak = [
                k
                for k in self.api_keys
                if k.strip().lower() in _PLACEHOLDER_KEYS or len(k) < _MIN_PRODUCTION_KEY_LENGTH
            ]
            if weak:
                raise ValueError(
                    f"CTXSVC_ENVIRONMENT=production refuses placeholder or short (< "
                    f"{_MIN_PRODUCTION_KEY_LENGTH} chars) API keys: {len(weak)} of the "
                    f"{len(self.api_keys)} in CTXSVC_API_KEYS"
                )
        return self


class ConfigError(Exception):
    """Settings the service cannot start with. ``lines``: one sentence per bad variable, each
    naming the variable, the value (never a secret) and what it must be."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def load_settings() -> Settings:
    """The process's settings, or a ``ConfigError`` that says what to fix."""
    try:
        return Settings()
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc)) from None
    except SettingsError as exc:  # e.g. an unreadable .env file
        raise ConfigError([f"cannot read the settings: {exc}"]) from None


# Set once the misspelt-variable warnings have been printed (not a setting: no CTXSVC_ prefix).
_WARNED_MARKER = "_CTXSVC_SETTINGS_WARNED"


def settings_or_exit() -> Settings:
    """``load_settings`` for a process's entry point (``ctxsvc``, ``app.main:app``): a
    misconfiguration prints its lines on stderr and exits with status 2, with no traceback.
    A variable that looks like a misspelt setting is named on stderr too (a warning), once per
    start: ``ctxsvc serve`` reads the settings, then its server reads them again (in the same
    process, or in each worker it starts, which inherit the marker set here)."""
    if os.environ.get(_WARNED_MARKER) != "1":
        for line in misspelt_variables(os.environ):
            print(f"ctxsvc: warning: {line}", file=sys.stderr)
        os.environ[_WARNED_MARKER] = "1"
    try:
        return load_settings()
    except ConfigError as exc:
        for line in exc.lines:
            print(f"ctxsvc: {line}", file=sys.stderr)
        raise SystemExit(2) from None


def default_settings(**values: Any) -> Settings:
    """Settings from the defaults and ``values`` alone: no environment, no ``.env``. What the
    committed OpenAPI document is built from, so a bad variable cannot break ``ctxsvc
    openapi`` and the document never depends on who generated it."""
    return Settings.model_construct(**values)


def misspelt_variables(environ: Mapping[str, str]) -> list[str]:
    """One sentence per ``CTXSVC_*`` variable that is no setting but close to one.

    A misspelt name is otherwise ignored without a word, and the service runs on a default
    (SQLite instead of the PostgreSQL the operator meant). Only near misses are named: other
    ``CTXSVC_*`` names are legitimate (a model's ``api_key_env``, test and bench variables).
    """
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    lines = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.85)
        if close:
            lines.append(f"{name} is not a setting and is ignored; did you mean {close[0]}?")
    return lines


# Never echoed: keys, and the password of a database URL (redacted instead).
_SECRET_FIELDS = frozenset({"api_keys"})


def describe_errors(exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        if not error["loc"]:  # a rule across fields: its message names the variables itself
            lines.append(str(error["ctx"].get("error", error["msg"])))
            continue
        name = str(error["loc"][0])
        field = Settings.model_fields.get(name)
        expected = field.description if field is not None and field.description else None
        variable = ENV_PREFIX + name.upper()
        line = f"{variable} must be {expected}" if expected else f"{variable}: {error['msg']}"
        # One of our validators says what is wrong with the value; pydantic's own words would
        # only repeat ``expected``.
        reason = str(error["ctx"]["error"]) if error["type"] == "value_error" else None
        if name in _SECRET_FIELDS:
            line += "; got a value that is not shown (it holds keys)"
            line += f": {reason}" if reason else ""
        else:
            line += f"; got {_shown(name, error['input'])}"
            line += f" ({reason})" if reason else ""
        if line not in lines:
            lines.append(line)
    return lines


def _shown(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return repr(redacted_url(text) if name == "database_url" else text)
