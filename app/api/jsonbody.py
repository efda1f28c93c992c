"""Request bodies decoded once, from the raw bytes.

FastAPI reads a JSON body with ``json.loads`` and then validates the Python objects, so every
string of a 20 MB prepare body is built twice and walked twice. A route of ``JsonBodyRoute``
hands FastAPI its body already read from the bytes, in the first of these ways that takes it:

1. a ``BodyInput``'s own reading (``decode``): the typed value the route works with, read
   straight from the bytes without model objects (the stateless prepare, token counts,
   appends: ``app/api/inputs/``);
2. pydantic's validation of the raw bytes (``model_validate_json``) into the body's model;
3. FastAPI's usual reading, which gives a malformed or invalid body exactly the error it
   always got (the problem handlers see FastAPI's errors, not pydantic's JSON-mode wording of
   them, and a validator that raises the service's own error raises it where it always did).

FastAPI then validates what it was handed as the body parameter's type: a model instance is
itself (a type check); a ``BodyInput`` is published and validated as its model and read from
the validated model (``BodyInput.of``), so whichever way a body was read the route gets the
same value, and the schema and every error answer are the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Generic, Self, TypeVar

from fastapi.routing import APIRoute
from pydantic import BaseModel, GetCoreSchemaHandler, ValidatorFunctionWrapHandler
from pydantic_core import CoreSchema, core_schema
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["BodyInput", "JsonBodyRoute"]

ModelT = TypeVar("ModelT", bound=BaseModel)


class BodyInput(Generic[ModelT]):
    """What a route takes from a body published as ``published_as`` (its model).

    A subclass is the typed value a route works with; ``of`` reads it from a validated model,
    ``decode`` (optional) straight from the raw bytes, taking only bodies the model takes and
    giving the very value ``of`` gives for them (``None``: declined, the model reads it).
    """

    published_as: ClassVar[type[BaseModel]]

    @classmethod
    def of(cls, model: ModelT) -> Self:
        raise NotImplementedError

    @classmethod
    def decode(cls, body: bytes) -> Self | None:
        return None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # The model's schema and errors; a value ``decode`` read already is taken as it is.
        def validate(value: Any, model: ValidatorFunctionWrapHandler) -> Any:
            if isinstance(value, cls):
                return value
            return cls.of(model(value))

        model_schema = handler.generate_schema(cls.published_as)
        return core_schema.no_info_wrap_validator_function(validate, model_schema)


class _ValidatedBody(Request):
    """A request whose ``json()`` is its body read by ``decode`` or validated as ``model``
    when either succeeds."""

    model: type[BaseModel]
    decode: Callable[[bytes], Any] | None = None

    async def body(self) -> bytes:
        # Starlette joins the chunks and the stream's closing empty one: a copy of the whole
        # body (0.3-0.5 ms of a 1.9 MB one). The request guard hands the body over in one
        # message (``app.api.limits``), which is kept as it is.
        if not hasattr(self, "_body"):
            chunks = [chunk async for chunk in self.stream() if chunk]
            self._body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            decoded = None if self.decode is None else self.decode(body)
            if decoded is not None:
                self._json = decoded
                return decoded
            try:
                self._json = self.model.model_validate_json(body)
            except Exception:  # any failure is FastAPI's to report
                # FastAPI's reading, and its errors: a ``ValidationError`` becomes its 422, a
                # validator's own ``ServiceError`` is raised from its validation as before
                # (raised here, FastAPI would call it a body it could not parse).
                return await super().json()
        return self._json


class JsonBodyRoute(APIRoute):
    """An ``APIRoute`` whose one (not embedded) model or ``BodyInput`` body is read from its
    raw bytes."""

    @property
    def body_type(self) -> type[Any] | None:
        """The body parameter's type when it is read from the bytes (``None``: the usual way)."""
        field = self.body_field
        kind = field.field_info.annotation if field is not None else None
        if self._embed_body_fields or not (
            isinstance(kind, type) and issubclass(kind, BaseModel | BodyInput)
        ):
            return None
        return kind

    @property
    def body_model(self) -> type[BaseModel] | None:
        """The model its body is validated as from the bytes (``None``: read the usual way)."""
        kind = self.body_type
        if kind is not None and issubclass(kind, BodyInput):
            return kind.published_as
        return kind

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        kind, model = self.body_type, self.body_model
        if kind is None or model is None:
            return handler
        reading: dict[str, Any] = {"model": model}
        if issubclass(kind, BodyInput):
            reading["decode"] = staticmethod(kind.decode)
        request_class = type("ValidatedBody", (_ValidatedBody,), reading)

        async def route(request: Request) -> Response:
            return await handler(request_class(request.scope, request.receive))

        return route
