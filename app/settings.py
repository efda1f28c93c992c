"""One Settings object, read once (environment variables ``CTXSVC_*`` or a ``.env`` file)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]

# Keys that are obviously examples; refused in production so a copied sample config fails loudly.
_PLACEHOLDER_KEYS = frozenset({"", "changeme", "change-me", "secret", "test", "example", "key"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CTXSVC_", env_file=".env", extra="ignore", frozen=True
    )

    environment: Literal["development", "production"] = "development"
    database_url: str = "sqlite+aiosqlite:///./data/ctxsvc.db"
    # Migrate the database to head on start-up (the embedded default needs no other setup).
    migrate_on_start: bool = True
    api_keys: list[str] = Field(default_factory=list)
    workspace_roots: list[str] = Field(default_factory=list)
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    tokenizer_dir: Path | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Structured JSON logs on stderr, configured at start-up (tests keep pytest's handlers).
    json_logs: bool = True
    # Turn runner
    turn_lease_seconds: float = Field(default=30.0, gt=0)
    # How often a runner checks for a cancel request posted to another replica (the lease is
    # renewed at a third of its duration from the same loop).
    turn_watch_interval_seconds: float = Field(default=1.0, gt=0)
    # How often each process interrupts turns whose runner's lease expired (SPEC §6).
    turn_reaper_interval_seconds: float = Field(default=10.0, gt=0)
    # Longest ``?wait=true`` (and cancel) answer time before the current state is returned.
    turn_wait_timeout_seconds: float = Field(default=60.0, gt=0)
    # Stored messages a process keeps of its sessions' last Conversation reads, so the next turn
    # reads only what was stored since (0: every turn reads its whole Conversation).
    turn_conversation_cache_messages: int = Field(default=20_000, ge=0)
    # Live updates: how often a stream re-reads the event log (other replicas' events), and
    # the comment-line heartbeat that keeps proxies from closing an idle stream.
    events_poll_seconds: float = Field(default=1.0, gt=0)
    events_heartbeat_seconds: float = Field(default=15.0, gt=0)
    provider_timeout_seconds: float = Field(default=600.0, gt=0)
    # Compaction summary attempts (SPEC §7.4); overridable so tests need not wait minutes.
    summary_attempts: int = Field(default=3, ge=1)
    summary_attempt_timeout_seconds: float = Field(default=120.0, gt=0)
    summary_retry_delay_seconds: float = Field(default=3.0, ge=0)
    # Apply the measured provider/estimate ratio to estimate-based models (issue 7).
    apply_calibration: bool = False

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
                raise ValueError("production requires CTXSVC_API_KEYS")
            weak = [
                k for k in self.api_keys if k.strip().lower() in _PLACEHOLDER_KEYS or len(k) < 16
            ]
            if weak:
                raise ValueError("production refuses placeholder or short (< 16 chars) API keys")
        return self
