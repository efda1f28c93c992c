"""The composition root: ``create_app(settings)`` wires everything; ``app`` is the ASGI entry."""

from __future__ import annotations

from fastapi import FastAPI

from app.api.limits import BodySizeLimit
from app.api.problems import install_error_handlers
from app.api.routes import prepare, service
from app.container import Container
from app.settings import Settings

__all__ = ["app", "create_app"]

DESCRIPTION = """Prepares the input of every LLM call an agent makes: builds the request from System
Context, Conversation and Tool Surface, prunes and pairs tool output, measures the budget, compacts
into validated summaries, and runs whole turns against model providers."""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(title="ctxsvc", version="0.1.0", description=DESCRIPTION)
    app.state.container = Container(settings=settings)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.include_router(service.router)
    app.include_router(prepare.router)
    return app


app = create_app()
