"""Turns (spec §6): start and idempotency, the agent loop, tool calls, leases and the reaper,
cancellation, live updates and the agent-message mailbox."""

from app.services.turns.mailbox import AgentMessageService, agent_message_text
from app.services.turns.service import TurnService

__all__ = ["AgentMessageService", "TurnService", "agent_message_text"]
