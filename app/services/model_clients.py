"""One ``ModelClient`` per model entry, over one shared HTTP session (``ProviderHTTP``)."""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Mapping

from app.core.errors import InvalidInput
from app.observability import CallTarget, Observability
from app.providers.base import (
    ModelClient,
    ProviderConfig,
    RetryPolicy,
    Timeouts,
    api_key_problem,
)
from app.providers.factory import http_model_client
from app.providers.http_client import ProviderHTTP
from app.providers.offline import LocalClient, ScriptedClient, ScriptEntry
from app.providers.tokenizers import COUNTER_NAMES
from app.services.model_types import READY, ModelEntry, ModelReadiness
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.registry import ModelRepository

__all__ = ["ModelClients"]

# The name a caller's own key is read under (never a variable of the process).
_CALLER_KEY = "CTXSVC_CALLER_PROVIDER_KEY"


class ModelClients:
    """Builds clients (each observed: ``app.observability.model_calls``); owns the shared HTTP
    client (closed by ``aclose`` at shutdown)."""

    def __init__(
        self,
        db: SessionFactory,
        *,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
        observability: Observability | None = None,
        allow_private_hosts: bool = False,
    ) -> None:
        self._db = db
        self._observability = observability or Observability()
        self._env = os.environ if env is None else env
        self._retry = retry
        self._timeouts = timeouts
        # Its session is made at the first provider call; proxies and trusted certificates
        # come from the same environment as the keys.
        self._http = ProviderHTTP(
            env=self._env,
            trace_configs=self._observability.provider_trace_configs(),
            allow_private_hosts=allow_private_hosts,
        )

    @property
    def http(self) -> ProviderHTTP:
        return self._http

    async def aclose(self) -> None:
        await self._http.aclose()

    def for_model(
        self,
        entry: ModelEntry,
        *,
        session_id: str,
        purpose: str = "turn",
        api_key: str | None = None,
    ) -> ModelClient:
        """The client of ``entry``'s provider for the calls of one session; ``purpose``
        (``turn``, ``summary`` or ``proxy``) labels its calls. A scripted model replays its
        script per session. ``api_key``: a caller's own provider key (spec §21.4), used
        instead of the variable the model names; it lives in this client only, never logged
        or stored."""
        provider = entry.provider
        target = CallTarget(entry.id, provider.kind, provider.model_name or entry.id, purpose)
        return self._observability.model_client(self._client(entry, session_id, api_key), target)

    def _client(
        self, entry: ModelEntry, session_id: str, api_key: str | None = None
    ) -> ModelClient:
        provider = entry.provider
        if provider.kind == "local":
            return LocalClient()
        if provider.kind == "scripted":
            owner = entry.owner or ""
            return ScriptedClient(entry.id, lambda: self._take(owner, entry.id, session_id))
        env: Mapping[str, str] = self._env
        key_env = provider.api_key_env
        if api_key is not None:
            # The adapters read a key from a variable at call time: the caller's key is one
            # such variable, seen by this client alone.
            key_env = _CALLER_KEY
            env = ChainMap({_CALLER_KEY: api_key}, dict(self._env))
        config = ProviderConfig(
            kind=provider.kind,
            base_url=provider.base_url or "",
            model_name=provider.model_name or entry.id,
            api_key_env=key_env,
            reasoning=entry.capabilities.reasoning,
        )
        return http_model_client(
            self.http, config, env=env, retry=self._retry, timeouts=self._timeouts
        )

    def readiness(self, entry: ModelEntry) -> ModelReadiness:
        """Whether ``for_model(entry)`` can call the model from this process: its capabilities
        must leave input room and name a token counter this version has, and a key that its
        provider names must be in this process's environment, usable in a header (checked again
        at every call)."""
        # Registration refuses both; only a row stored under other rules (another version, a
        # hand edit) can get here.
        try:
            entry.capabilities.limits()
        except InvalidInput as inconsistent:
            return ModelReadiness(
                "not_ready",
                "invalid_capabilities",
                f"calls to this model will fail: {inconsistent.detail}; register it again "
                "with capabilities that leave input room",
            )
        counter = entry.capabilities.token_counter
        if counter not in COUNTER_NAMES:
            return ModelReadiness(
                "not_ready",
                "unknown_token_counter",
                f"calls to this model will fail: this version has no token counter {counter!r}; "
                f"register it again with one of: {', '.join(COUNTER_NAMES)}",
            )
        if entry.provider.kind in ("local", "scripted"):
            return READY
        problem = api_key_problem(entry.provider.api_key_env, self._env)
        if problem is None:
            return READY
        code, sentence = problem
        return ModelReadiness("not_ready", code, f"calls to this model will fail: {sentence}")

    async def _take(self, owner: str, model_id: str, session_id: str) -> ScriptEntry | None:
        # Its own short transaction: the model row is locked only while the position advances.
        async with unit_of_work(self._db) as db:
            taken = await ModelRepository(db).take_script_entry(owner, model_id, session_id)
        if taken is None:
            return None
        return ScriptEntry(taken.index, taken.length, taken.entry)
