"""World State sampling into a stored session (spec §4): capture → render → diff → write → advance.

Two phases, so a caller need not hold a database transaction while the filesystem is read:

- ``capture(session)`` reads the workspace inputs. A server directory is read in a worker thread
  (the event loop never blocks) within ``capture_timeout_seconds``; caller-provided inputs are
  checked again by the same rules; a session without a workspace has only the sandbox section.
  Raises ``user_project_context_error | project_instruction_error | skill_catalog_error``.
- ``write(db, session, conversation, inputs, ...)`` renders with the session's sandbox settings
  and disabled skills, diffs against the stored baselines and ``conversation``, writes each
  message insert-if-absent under its spec §4 id, and advances the baselines only after every
  write succeeded — all in the caller's transaction, so a rollback undoes messages and baselines
  together and the next sampling sends the same messages again.

``sample`` is both, as ``app.services.ports.WorldStateSampling`` declares it for the turn runner.

The stored baselines change only when a sample writes messages, yet every sample needs them: the
sampler keeps the last baselines it saw per session under the session's ``world_state_version``
(see ``_BaselineCache``) and reads them again only when the row loaded by the caller shows
another token.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
from sqlalchemy.ext.asyncio import AsyncSession

from app import fastjson
from app.core.content import Item, text_block
from app.core.errors import InvalidInput
from app.core.world_state import (
    NO_WORKSPACE,
    SectionMessage,
    WorkspaceInputs,
    advance_baselines,
    diff_sections,
    render_sections,
    world_state_message_id,
)
from app.core.world_state.provided import provided_inputs_of
from app.observability import Observability
from app.services.lru import BytesLRU
from app.services.pins import pins_section
from app.services.session_config import (
    agent_profile_of,
    disabled_skills_of,
    sandbox_of,
    workspace_of,
)
from app.settings import Settings
from app.storage.models import AgentSession
from app.storage.models.session import UNKNOWN_WORLD_STATE_VERSION
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.state import BaselineRepository
from app.workspace import capture_filesystem

__all__ = ["DEFAULT_CAPTURE_TIMEOUT_SECONDS", "WorldStateSampler"]

log = logging.getLogger("ctxsvc.world_state")

# Listing one directory and reading AGENTS.md plus at most 100 SKILL.md files takes milliseconds
# (bench/world_state.py); anything near this bound is a stuck network filesystem.
DEFAULT_CAPTURE_TIMEOUT_SECONDS = 10.0


Baselines = dict[str, str | None]


def _source_of(session: AgentSession) -> str:
    """Where the session's World State comes from: ``directory``, ``provided`` or ``none``."""
    workspace = workspace_of(session)
    if not workspace:
        return "none"
    return "provided" if workspace.get("provided") is not None else "directory"


# The World State baselines a process keeps (``_BaselineCache``), in bytes of baseline text.
BASELINE_CACHE_BYTES = 32 * 1024 * 1024


class _BaselineCache:
    """Per process: session id → (``world_state_version``, the baselines stored under it), the
    least recently used session dropped beyond ``max_bytes`` of baseline text (the bodies' UTF-8
    bytes, at most ~90 KB a session: spec §4's section caps).

    The version is a random token renewed by every baseline write (``BaselineRepository.apply``),
    not a counter: a counter bumped by a transaction that then rolled back could be reached again
    by a different write (another transaction, another replica) and name other baselines, while
    a token is never issued twice, so an entry put before its transaction committed (or for one
    that rolled back) can only ever match its own baselines. Entries are copied in and out, so
    callers may change what they get.
    """

    def __init__(self, max_bytes: int = BASELINE_CACHE_BYTES) -> None:
        self._entries: BytesLRU[str, tuple[str, Baselines]] = BytesLRU(max_bytes)

    def get(self, session_id: str, version: str) -> Baselines | None:
        entry = self._entries.get(session_id)
        if entry is None or entry[0] != version or version == UNKNOWN_WORLD_STATE_VERSION:
            return None
        return dict(entry[1])

    def put(self, session_id: str, version: str, baselines: Mapping[str, str | None]) -> None:
        # A row inserted without the ORM has no token yet: nothing can be known under it.
        if version == UNKNOWN_WORLD_STATE_VERSION:
            return
        size = sum(64 + len(k) + len((v or "").encode()) for k, v in baselines.items())
        self._entries.put(session_id, (version, dict(baselines)), size)


# The caller-provided inputs a process keeps (``_ProvidedCache``), in bytes of their JSON.
PROVIDED_CACHE_BYTES = 32 * 1024 * 1024


class _ProvidedCache:
    """Per process: session id → (the stored ``workspace.provided`` value, the inputs built from
    it by ``provided_inputs_of``), the least recently used session dropped beyond ``max_bytes``
    of that value's JSON. A turn captures at every step, and checking and rendering a
    100 000-entry layout again takes ~20 ms where comparing it with the value kept takes ~2:
    the inputs are reused only when the stored value equals the one they were built from."""

    def __init__(self, max_bytes: int = PROVIDED_CACHE_BYTES) -> None:
        self._entries: BytesLRU[str, tuple[dict[str, Any], WorkspaceInputs]] = BytesLRU(max_bytes)

    def inputs(self, session_id: str, provided: dict[str, Any]) -> WorkspaceInputs:
        entry = self._entries.get(session_id)
        if entry is not None and entry[0] == provided:
            return entry[1]
        inputs = provided_inputs_of(provided)  # raises for values its rules refuse: not kept
        # A copy (a loaded row's value could be changed in place after this), through its JSON,
        # which is also its size.
        data = fastjson.dumps(provided)
        self._entries.put(session_id, (fastjson.loads(data), inputs), len(data))
        return inputs


class WorldStateSampler:
    """Implements ``WorldStateSampling``; one per app. The baselines live in the database; the
    sampler only caches them per session (``_BaselineCache``)."""

    def __init__(
        self,
        settings: Settings,
        *,
        capture_timeout_seconds: float = DEFAULT_CAPTURE_TIMEOUT_SECONDS,
        observability: Observability | None = None,
    ) -> None:
        self._roots = tuple(settings.workspace_roots)
        self._timeout = capture_timeout_seconds
        self._baselines = _BaselineCache()
        self._provided = _ProvidedCache()
        self._observability = observability or Observability()

    def capture_reads_files(self, session: AgentSession) -> bool:
        workspace = workspace_of(session)
        if not workspace:
            return False
        return workspace.get("provided") is None

    async def capture(self, session: AgentSession) -> WorkspaceInputs:
        """The session's workspace inputs as they are now (see the module docstring)."""
        with self._observability.world_state("capture", _source_of(session)):
            return await self._capture(session)

    async def _capture(self, session: AgentSession) -> WorkspaceInputs:
        workspace = workspace_of(session)
        if not workspace:
            return NO_WORKSPACE
        provided = workspace.get("provided")
        if provided is not None:
            return self._provided.inputs(session.id, provided)
        directory: str = workspace["working_directory"]
        skills_root: str | None = workspace.get("skills_root")

        def read() -> WorkspaceInputs:
            return capture_filesystem(directory, allowed_roots=self._roots, skills_root=skills_root)

        # The thread cannot be interrupted; on timeout it is abandoned and finishes on its own
        # (it only reads, and closes every descriptor it opened).
        with anyio.move_on_after(self._timeout) as scope:
            return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
        assert scope.cancelled_caught
        raise InvalidInput(
            "user_project_context_error",
            f"Reading the workspace {directory!r} took longer than {self._timeout:g} seconds; "
            "check that the filesystem is responsive and the directory is not too large.",
            timeout_seconds=self._timeout,
        )

    async def write(
        self,
        db: AsyncSession,
        session: AgentSession,
        conversation: Sequence[Item],
        inputs: WorkspaceInputs,
        *,
        turn_id: str,
        model_call_index: int,
        sample_index: int,
        record_turn: bool = True,
    ) -> list[Item]:
        """Render, diff, write and advance in the caller's transaction; the written items.

        ``record_turn=False`` leaves the messages' ``turn_id`` column empty (session prepare has
        a request-scoped id, not a turn row). Takes the session's write lock first, so two
        samplings of one session never both read the old baselines. When ``session`` is the row
        loaded in this transaction under that lock (``require(..., for_update=True)``), its
        ``world_state_version`` is current and the cached baselines are used if it matches.
        """
        with self._observability.world_state("write", _source_of(session)):
            sessions = SessionRepository(db)
            # Asked before ``lock``: a row loaded before the lock may show an outdated token.
            current_row = sessions.is_current(session)
            await sessions.lock(session.id)
            sections = render_sections(
                inputs,
                sandbox_of(session),
                disabled_skills_of(session),
                agent_profile_of(session).sections.section_ids(),
            )
            sections.append(await pins_section(db, session, current_row))
            self._log_skipped(session.id, inputs, [s.dropped for s in sections])
            current = await self._stored_baselines(db, session, current_row)
            messages = diff_sections(sections, current, conversation)
            if not messages:
                return []
            written = await self._insert(
                db, session.id, messages, turn_id, model_call_index, sample_index, record_turn
            )
            # Only now, with every message written: a failure above leaves the old baselines.
            advanced = advance_baselines(current, messages)
            version = await BaselineRepository(db).apply(
                session.id, {m.section_id: advanced[m.section_id] for m in messages}
            )
            # Before the commit, and safely so: the new token is visible to nobody unless this
            # transaction commits, and then it names exactly ``advanced``.
            self._baselines.put(session.id, version, advanced)
            return written

    async def _stored_baselines(
        self, db: AsyncSession, session: AgentSession, current_row: bool
    ) -> Baselines:
        if not current_row:
            return await BaselineRepository(db).get_all(session.id)
        version = session.world_state_version
        cached = self._baselines.get(session.id, version)
        if cached is not None:
            return cached
        # Read under the lock, so they are the baselines stored under ``version``.
        stored = await BaselineRepository(db).get_all(session.id)
        self._baselines.put(session.id, version, stored)
        return stored

    async def sample(
        self,
        db: AsyncSession,
        session: AgentSession,
        conversation: Sequence[Item],
        *,
        turn_id: str,
        model_call_index: int,
        sample_index: int,
    ) -> list[Item]:
        """``capture`` then ``write`` (``WorldStateSampling``)."""
        inputs = await self.capture(session)
        return await self.write(
            db,
            session,
            conversation,
            inputs,
            turn_id=turn_id,
            model_call_index=model_call_index,
            sample_index=sample_index,
        )

    async def _insert(
        self,
        db: AsyncSession,
        session_id: str,
        messages: Sequence[SectionMessage],
        turn_id: str,
        model_call_index: int,
        sample_index: int,
        record_turn: bool,
    ) -> list[Item]:
        repository = MessageRepository(db)
        written: list[Item] = []
        for message in messages:
            stored = await repository.insert_if_absent(
                session_id,
                NewMessage(
                    role="user",
                    kind="world_state",
                    content=[text_block(message.text)],
                    message_id=world_state_message_id(
                        turn_id, model_call_index, sample_index, message.section_id
                    ),
                    turn_id=turn_id if record_turn else None,
                    world_state_section=message.section_id,
                ),
            )
            # None: a retry of a sampling whose message is already stored (and already part of
            # the caller's conversation); writing it again would duplicate it.
            if stored is not None:
                written.append(stored.to_item())
        return written

    @staticmethod
    def _log_skipped(
        session_id: str, inputs: WorkspaceInputs, dropped: Sequence[Sequence[str]]
    ) -> None:
        # Names and reasons only, never descriptions or bodies: logs are not model context.
        for warning in inputs.warnings:
            log.info("skill catalog warning", extra={"session_id": session_id, "reason": warning})
        for line in (line for group in dropped for line in group):
            name = line[2:].split(":", 1)[0]
            log.info(
                "skill omitted from catalog because the 8000 character limit was exceeded",
                extra={"session_id": session_id, "skill": name},
            )
