"""Routes of the context map.

A page (``/ui``, ``/ui/sessions/{id}``, a checkpoint's page) is a shell that anyone may load:
it holds no data when the service has API keys. Its data comes in a *part*
(``/ui/parts/...``), an HTML fragment served under the same API-key check as ``/v1``, which the
page's script fetches with the key from session storage (a header, never the URL) and fetches
again when the session's event stream reports a change. Without API keys the page carries its
part from the start, so it reads without a round trip.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Query
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.api.auth import PrincipalDep, require_api_key
from app.api.deps import ContainerDep
from app.api.problems import status_of
from app.api.render.compactions import checkpoint_json, checkpoint_summary_json
from app.api.render.messages import stored_json
from app.api.render.turns import turn_page_json
from app.container import Container
from app.core.chat_rules import MAX_SEQUENCE
from app.core.errors import ServiceError
from app.core.tenancy import OPEN_PRINCIPAL, Principal
from app.web import panels, views
from app.web.render import html, render

__all__ = ["install_web"]

STATIC = Path(__file__).parent / "static"
SESSIONS_PER_PAGE = 25
TURNS_SHOWN = 20
CHECKPOINTS_SHOWN = 50
TRANSCRIPT_PAGE = 50
PROPOSALS_SHOWN = 20

pages = APIRouter(prefix="/ui", include_in_schema=False)
parts = APIRouter(
    prefix="/ui/parts", include_in_schema=False, dependencies=[Depends(require_api_key)]
)

SessionId = Annotated[str, PathParam(min_length=1, max_length=200)]
CompactionId = Annotated[str, PathParam(min_length=1, max_length=200)]
Cursor = Annotated[str | None, Query(max_length=500)]
AfterSequence = Annotated[int, Query(ge=0, le=MAX_SEQUENCE)]


def install_web(app: FastAPI) -> None:
    app.include_router(pages)
    app.include_router(parts)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="ui-static")


def _url(path: str, **query: object) -> str:
    given = {k: v for k, v in query.items() if v not in (None, 0)}
    return f"{path}?{urlencode(given)}" if given else path


async def _page(
    container: Container,
    part: Callable[[], Awaitable[str]],
    *,
    title: str,
    part_url: str,
    events_url: str | None = None,
    crumbs: list[tuple[str, str]] | None = None,
) -> HTMLResponse:
    """The page around a part: the part inline unless the service wants an API key (then the
    page's script loads ``part_url`` with the key)."""
    keyed = bool(container.settings.api_keys)
    inline, status = None, 200
    if not keyed:
        try:
            inline = await part()
        except ServiceError as error:
            inline, status = render("parts/error.html", error=error), status_of(error)
    body = render(
        "page.html",
        title=title,
        part=inline,
        part_url=part_url,
        events_url=events_url,
        keyed=keyed,
        crumbs=crumbs or [],
    )
    return html(body, status)


# ----- sessions ------------------------------------------------------------------------------


@pages.get("", response_class=HTMLResponse)
async def sessions_page(container: ContainerDep, cursor: Cursor = None) -> HTMLResponse:
    """Sessions, newest first, with what their turns cost."""
    return await _page(
        container,
        lambda: sessions_part_html(container, OPEN_PRINCIPAL, cursor),
        title="Sessions",
        part_url=_url("/ui/parts/sessions", cursor=cursor),
    )


@parts.get("/sessions", response_class=HTMLResponse)
async def sessions_part(
    container: ContainerDep, principal: PrincipalDep, cursor: Cursor = None
) -> HTMLResponse:
    return html(await sessions_part_html(container, principal, cursor))


async def sessions_part_html(container: Container, caller: Principal, cursor: str | None) -> str:
    page = await container.sessions.list(caller.tenant_id, limit=SESSIONS_PER_PAGE, cursor=cursor)
    return render(
        "parts/sessions.html",
        rows=views.session_rows(page.sessions),
        next_url=_url("/ui", cursor=page.next_cursor) if page.next_cursor else None,
        first_page=cursor is None,
    )


# ----- one session's context map -------------------------------------------------------------


@pages.get("/sessions/{session_id}", response_class=HTMLResponse)
async def session_page(session_id: SessionId, container: ContainerDep) -> HTMLResponse:
    """The context map of one session: what the model will see next, and why."""
    return await _page(
        container,
        lambda: context_part_html(container, OPEN_PRINCIPAL, session_id),
        title=f"Session {session_id}",
        part_url=f"/ui/parts/sessions/{session_id}",
        events_url=f"/v1/sessions/{session_id}/events",
        crumbs=[("Sessions", "/ui")],
    )


@parts.get("/sessions/{session_id}", response_class=HTMLResponse)
async def context_part(
    session_id: SessionId, container: ContainerDep, principal: PrincipalDep
) -> HTMLResponse:
    return html(await context_part_html(container, principal, session_id))


async def context_part_html(container: Container, caller: Principal, session_id: str) -> str:
    await container.tenancy.check_owner(caller.tenant_id, session_id)
    # The session first: its last update id is then at most what the map shows, so the
    # stream the page follows from it never misses a change.
    session = await container.sessions.get(session_id)
    inspection = await container.inspection.inspection(session_id)
    checkpoints = await container.compactor.list(session_id, limit=CHECKPOINTS_SHOWN)
    listed = [checkpoint_summary_json(c) for c in checkpoints.compactions]
    turns = await container.turns.list(session_id, limit=TURNS_SHOWN, cursor=None)
    pins = panels.pins_view(
        await container.pins.pins(session_id),
        await container.pins.proposals(session_id, "open", limit=PROPOSALS_SHOWN),
        inspection,
    )
    view = views.context_map(session, inspection, listed, turn_page_json(turns)["turns"], pins)
    return render("parts/context.html", map=view)


# ----- a checkpoint and the transcript it covers ----------------------------------------------


@pages.get("/sessions/{session_id}/compactions/{compaction_id}", response_class=HTMLResponse)
async def checkpoint_page(
    session_id: SessionId,
    compaction_id: CompactionId,
    container: ContainerDep,
    after_sequence: AfterSequence = 0,
) -> HTMLResponse:
    """A checkpoint: its summary and reminder, and the raw messages it covers."""
    return await _page(
        container,
        lambda: checkpoint_part_html(
            container, OPEN_PRINCIPAL, session_id, compaction_id, after_sequence
        ),
        title=f"Checkpoint {compaction_id}",
        part_url=_url(
            f"/ui/parts/sessions/{session_id}/compactions/{compaction_id}",
            after_sequence=after_sequence,
        ),
        crumbs=[("Sessions", "/ui"), (session_id, f"/ui/sessions/{session_id}")],
    )


@parts.get("/sessions/{session_id}/compactions/{compaction_id}", response_class=HTMLResponse)
async def checkpoint_part(
    session_id: SessionId,
    compaction_id: CompactionId,
    container: ContainerDep,
    principal: PrincipalDep,
    after_sequence: AfterSequence = 0,
) -> HTMLResponse:
    return html(
        await checkpoint_part_html(container, principal, session_id, compaction_id, after_sequence)
    )


async def checkpoint_part_html(
    container: Container,
    caller: Principal,
    session_id: str,
    compaction_id: str,
    after_sequence: int,
) -> str:
    await container.tenancy.check_owner(caller.tenant_id, session_id)
    checkpoint = checkpoint_json(await container.compactor.get(session_id, compaction_id))
    transcript = await container.compactor.transcript(
        session_id,
        compaction_id=compaction_id,
        after_sequence=after_sequence,
        limit=TRANSCRIPT_PAGE,
    )
    page_url = f"/ui/sessions/{session_id}/compactions/{compaction_id}"
    following = transcript.page.next_after_sequence if transcript.page.has_more else None
    return render(
        "parts/checkpoint.html",
        checkpoint=panels.checkpoint_view(checkpoint, None),
        summary=checkpoint["summary"],
        reminder=checkpoint["runtime_reminder"],
        messages=[panels.transcript_message(stored_json(m)) for m in transcript.messages],
        session_id=session_id,
        next_url=_url(page_url, after_sequence=following) if following is not None else None,
        first_url=page_url if after_sequence else None,
    )
