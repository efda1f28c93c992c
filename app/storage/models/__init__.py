"""ORM models. Importing this package registers every table on ``Base.metadata``."""

from app.storage.base import Base
from app.storage.models.conversation import COMPACTION_KINDS, Compaction, Message, ToolCall
from app.storage.models.pins import PinProposal, SessionPin
from app.storage.models.proxy import ProxyEnd
from app.storage.models.registry import CalibrationSample, RegisteredModel
from app.storage.models.session import AgentSession
from app.storage.models.state import (
    AgentMessage,
    ScriptPosition,
    SessionEvent,
    SessionRequestPrefix,
    WorldStateBaseline,
)
from app.storage.models.tenancy import ApiKey
from app.storage.models.turn import TURN_STATUSES, Turn

__all__ = [
    "COMPACTION_KINDS",
    "TURN_STATUSES",
    "AgentMessage",
    "AgentSession",
    "ApiKey",
    "Base",
    "CalibrationSample",
    "Compaction",
    "Message",
    "PinProposal",
    "ProxyEnd",
    "RegisteredModel",
    "ScriptPosition",
    "SessionEvent",
    "SessionPin",
    "SessionRequestPrefix",
    "ToolCall",
    "Turn",
    "WorldStateBaseline",
]
