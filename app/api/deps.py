"""``Annotated`` dependency aliases used by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.container import Container

__all__ = ["ContainerDep"]


async def get_container(request: Request) -> Container:
    # ``async`` on purpose: FastAPI runs a plain ``def`` dependency in a worker thread, a thread
    # hop on every request for a lookup.
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]
