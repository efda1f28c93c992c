"""Request body size limit (413 ``request_too_large``), enforced while the body streams in."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

__all__ = ["BodySizeLimit"]


class BodySizeLimit:
    """Pure ASGI middleware: refuses by ``Content-Length`` up front, or once the stream passes it.

    The streaming case raises ``HTTPException(413)`` from ``receive``: FastAPI re-raises HTTP
    exceptions met while reading a body, so the one error handler renders it.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _detail(self) -> str:
        return (
            f"The request body exceeds {self.max_bytes} bytes (CTXSVC_MAX_BODY_BYTES); "
            "send less content per request."
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                response = problem_response(413, "request_too_large", self._detail())
                await response(scope, receive, send)
                return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self._detail())
            return message

        await self.app(scope, limited_receive, send)
