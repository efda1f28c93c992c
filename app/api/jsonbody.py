"""Request bodies decoded once: pydantic validates the raw bytes (``model_validate_json``).

FastAPI reads a JSON body with ``json.loads`` and then validates the Python objects, so every
string of a 20 MB prepare body is built twice and walked twice. A route of ``JsonBodyRoute``
hands FastAPI the model pydantic validated from the bytes instead (FastAPI's own validation of
an instance of the very model is a type check). A body that fails this validation is read the
usual way, so a malformed or invalid body gets exactly the error it always got (the problem
handlers see FastAPI's errors, not pydantic's JSON-mode wording of them, and a validator that
raises the service's own error raises it where it always did).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["JsonBodyRoute"]


class _ValidatedBody(Request):
    """A request whose ``json()`` is its body validated as ``model`` when that succeeds."""

    model: type[BaseModel]

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = self.model.model_validate_json(body)
            except Exception:  # any failure is FastAPI's to report
                # FastAPI's reading, and its errors: a ``ValidationError`` becomes its 422, a
                # validator's own ``ServiceError`` is raised from its validation as before
                # (raised here, FastAPI would call it a body it could not parse).
                return await super().json()
        return self._json


class JsonBodyRoute(APIRoute):
    """An ``APIRoute`` whose one (not embedded) model body is validated from its raw bytes."""

    @property
    def body_model(self) -> type[BaseModel] | None:
        """The model its body is validated as from the bytes (``None``: read the usual way)."""
        field = self.body_field
        model = field.field_info.annotation if field is not None else None
        if self._embed_body_fields or not (
            isinstance(model, type) and issubclass(model, BaseModel)
        ):
            return None
        return model

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        model = self.body_model
        if model is None:
            return handler
        request_class = type("ValidatedBody", (_ValidatedBody,), {"model": model})

        async def route(request: Request) -> Response:
            return await handler(request_class(request.scope, request.receive))

        return route
