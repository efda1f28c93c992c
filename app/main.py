"""The composition root: ``create_app(settings)`` wires everything; ``app`` is the ASGI entry."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_standalone_docs import StandaloneDocs
from opentelemetry.sdk.trace import TracerProvider

from app.api.auth import require_api_key
from app.api.key_first import KeyBeforeBody
from app.api.limits import RequestGuard
from app.api.methods import MethodDispatch
from app.api.observability import RequestContext
from app.api.openapi import install_openapi
from app.api.problems import UnexpectedErrors, install_error_handlers
from app.api.routes import (
    admin,
    agent_messages,
    compactions,
    compat,
    events,
    models,
    pins,
    prepare,
    service,
    session_items,
    session_prepare,
    sessions,
    tokens,
    turns,
)
from app.container import VERSION, Container
from app.observability import configure_logging, configure_text_logging
from app.settings import Settings, load_settings, settings_or_exit
from app.signals import on_stop_signal
from app.storage.migrate import upgrade_to_head
from app.web import install_web

__all__ = ["GC_THRESHOLDS", "create_app"]  # and ``app``, built on first access (below)

# The collector's thresholds for a server process (Python's default: 700, 10, 10). With a long
# Conversation in memory (thousands of messages, each a few objects), collections at the default
# rate cost more than everything else a model call does: 43 → 16 ms per call at 5 000 messages in
# ``bench/turns.py``, no change at 100. Young objects are collected every 20 000 allocations
# instead of 700, so at most that many objects' worth of cyclic garbage waits a little longer.
GC_THRESHOLDS = (20_000, 20, 20)

DESCRIPTION = """Prepares the input of every LLM call an agent makes: builds the request from System
Context, Conversation and Tool Surface, prunes and pairs tool output, measures the budget, compacts
into validated summaries, and runs whole turns against model providers.

Every request body is JSON in UTF-8 (`Content-Type: application/json`). No string anywhere in a
request may hold U+0000 (no store keeps it); free-form JSON values (tool input schemas, payloads,
artifacts) nest at most 64 levels and hold at most 1 048 576 characters of JSON. Errors are
`application/problem+json` with a stable `code`; each operation lists its codes per status.
Any request may also meet the server's own refusals, before an operation is chosen:
`400 malformed_request` (not HTTP/1.1) and `431 headers_too_large` (request line and headers past
`CTXSVC_MAX_HEADER_BYTES`)."""


def create_app(
    settings: Settings | None = None, *, tracer_provider: TracerProvider | None = None
) -> FastAPI:
    """``tracer_provider`` replaces the one the ``OTEL_*`` variables would build (tests)."""
    settings = settings or load_settings()
    container = Container.build(settings, tracer_provider=tracer_provider)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if settings.json_logs:
            configure_logging(settings.log_level)
        else:
            configure_text_logging(settings.log_level)
        gc.set_threshold(*GC_THRESHOLDS)
        if settings.migrate_on_start:
            await upgrade_to_head(settings.database_url)
        # The lease reaper runs in every process; runners stop before the database closes. A
        # stop signal ends this process's turns at once, before the server waits for the
        # requests they keep open (``app.signals``).
        await container.turns.start_background()
        restore_signals = on_stop_signal(container.turns.begin_drain)
        try:
            yield
        finally:
            restore_signals()
            await container.turns.stop_background()
            await container.aclose()

    # Swagger UI's validator badge would fetch an image from validator.swagger.io whenever the
    # page is not on localhost: off.
    app = FastAPI(
        title="ctxsvc",
        version=VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},
    )
    # /docs and /redoc load Swagger UI, ReDoc, ReDoc's logo and the favicon from the copies
    # fastapi-standalone-docs ships (served under /docs/ and /redoc/), never from a CDN: the
    # pages work on a network without internet (docs/decisions.md, "Offline docs pages").
    StandaloneDocs(app=app)
    app.state.container = container
    install_error_handlers(app)
    install_openapi(app)
    app.add_middleware(MethodDispatch, routes=app.routes)
    app.add_middleware(RequestGuard, max_bytes=settings.max_body_bytes)
    # Outside the guard, which reads the body: the key first (``app.api.key_first``).
    app.add_middleware(KeyBeforeBody, routes=app.routes)
    # Inside the request context (its id, its access line with the 500), around everything else.
    app.add_middleware(UnexpectedErrors, outages=container.outages)
    app.add_middleware(RequestContext, metrics=container.metrics)
    app.include_router(service.router)
    # Authenticated by the route itself: the SDKs send the key as Bearer or x-api-key, and
    # every answer, a refusal included, is in the protocol's shape (spec §21). Early in the
    # table: a proxied call is matched against the routes before it (its paths overlap none).
    app.include_router(compat.router)
    secured = [Depends(require_api_key)]  # every /v1 route; health and docs stay open
    for router in (
        prepare.router,
        models.router,
        sessions.router,
        session_prepare.router,
        session_items.router,
        tokens.router,
        compactions.router,
        turns.router,
        events.router,
        agent_messages.router,
        pins.router,
        admin.router,
    ):
        app.include_router(router, dependencies=secured)
    install_web(app)  # the context map: pages open, their data parts under the same key check
    container.observability.instrument_app(app)
    return app


_entry: FastAPI | None = None


def __getattr__(name: str) -> FastAPI:
    """The ASGI entry, ``uvicorn app.main:app``, built from the environment when first asked
    for (a misconfiguration ends the process in one line). Not at import: importing
    ``create_app`` (tests, ``ctxsvc openapi``) must not read the environment or build an app."""
    global _entry
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _entry is None:
        _entry = create_app(settings_or_exit())
    return _entry
