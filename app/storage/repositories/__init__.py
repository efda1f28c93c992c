"""Repositories: every query of the service lives here. They flush at most; never commit."""

from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository, new_message_id
from app.storage.repositories.records import (
    EventRecord,
    MessagePage,
    NewEvent,
    NewMessage,
    StoredMessage,
    ToolCallRecord,
)
from app.storage.repositories.registry import CalibrationRepository, ModelRepository, ScriptTake
from app.storage.repositories.sessions import SessionRepository, session_not_found
from app.storage.repositories.state import BaselineRepository, EventRepository, MailboxRepository
from app.storage.repositories.turns import TurnRepository

__all__ = [
    "BaselineRepository",
    "CalibrationRepository",
    "CompactionRepository",
    "EventRecord",
    "EventRepository",
    "MailboxRepository",
    "MessagePage",
    "MessageRepository",
    "ModelRepository",
    "NewEvent",
    "NewMessage",
    "ScriptTake",
    "SessionRepository",
    "StoredMessage",
    "ToolCallRecord",
    "TurnRepository",
    "new_message_id",
    "session_not_found",
]
