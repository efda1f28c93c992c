"""Handling one response's tool calls in provider order (spec §6).

Each call is checked before anything runs: arguments that are not JSON, an unknown tool, a
schema violation and a schema that cannot be applied become error results the model sees (the
turn continues) and never count for the doom loop. A checked call updates the doom-loop record
(same name and canonical arguments as the previous checked call → count + 1, anything else →
1); at the threshold the call is not executed and the turn fails ``doom_loop``. Server-side
tools run here, in the caller's transaction; every other tool is marked for the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import UnknownDialect, specification_with
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import jsontext
from app.core.compaction.transcript import CONVERSATION_HISTORY_TOOL
from app.core.content import text_block
from app.core.limits.json_values import json_text_problem
from app.core.pipeline.prepared_call import ToolDefinition
from app.core.turn_plan import PLAN_UPDATED_TEXT, UPDATE_PLAN_TOOL, PlanArgumentsInvalid
from app.core.turn_plan import parse_update_plan_arguments as parse_plan
from app.services.events import EventEmitter
from app.services.lru import BytesLRU
from app.services.turns.calls import CallEntry, CallResult, error_result, finished_payload
from app.storage.base import utc_now

__all__ = ["DoomRecord", "ToolRound", "check_call", "handle_calls"]

UPDATE_PLAN = UPDATE_PLAN_TOOL["name"]
CONVERSATION_HISTORY = CONVERSATION_HISTORY_TOOL["name"]


@dataclass(frozen=True, slots=True)
class DoomRecord:
    name: str
    canonical: str
    count: int

    def after(self, name: str, canonical: str) -> DoomRecord:
        if self.name == name and self.canonical == canonical:
            return DoomRecord(name, canonical, self.count + 1)
        return DoomRecord(name, canonical, 1)

    def to_json(self) -> list[Any]:
        return [self.name, self.canonical, self.count]

    @classmethod
    def from_json(cls, value: Any) -> DoomRecord | None:
        if not isinstance(value, list) or len(value) != 3:
            return None
        return cls(str(value[0]), str(value[1]), int(value[2]))


@dataclass(frozen=True, slots=True)
class ToolRound:
    """What the round decided: continue with the next model call, wait for the caller, or end
    the turn (doom loop; ``message`` says why)."""

    next: Literal["continue", "wait", "doom_loop"]
    doom: DoomRecord | None
    message: str = ""
    # The turn's plan as the round's last successful ``update_plan`` left it (``None``: not
    # changed); the caller writes it to the turn row with the phase that ends its step.
    plan: dict[str, Any] | None = None


def _validator_class(schema: Any) -> type[Validator]:
    """The dialect's validator; the latest draft when ``$schema`` names no dialect we know.

    jsonschema looks ``$schema`` up as a URI: a number there raises AttributeError and an
    unknown URI warns (an error under the suite's warning filter). Both mean what jsonschema
    itself falls back to, the latest draft, as the session's schema check assumes
    (``services/tool_schemas.py``)."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return validator_for(schema)
    declared = schema["$schema"]
    if isinstance(declared, str):
        try:
            specification_with(declared)
        except UnknownDialect:
            pass
        else:
            return validator_for(schema)
    return Draft202012Validator


# Checked validators by schema JSON, at most this many bytes of it (the validators' objects take
# a small multiple of their schema's size).
VALIDATOR_CACHE_BYTES = 16 * 1024 * 1024
_validators: BytesLRU[str, tuple[Validator | None]] = BytesLRU(VALIDATOR_CACHE_BYTES)


def _validator(schema_json: str) -> Validator | None:
    """The checked validator of a tool's input schema (``None``: the schema is broken), built
    once per process and schema: checking a schema costs far more than validating a value."""
    known = _validators.get(schema_json)
    if known is None:
        known = (_checked_validator(schema_json),)
        _validators.put(schema_json, known, len(schema_json))
    return known[0]


def _checked_validator(schema_json: str) -> Validator | None:
    try:
        schema = json.loads(schema_json)
        validator_class = _validator_class(schema)
        validator_class.check_schema(schema)
        # An empty registry: a ``$ref`` to another document is never fetched (jsonschema's
        # default registry would GET any URL the agent's schema names, blocking the loop).
        return validator_class(schema, registry=Registry())
    except (SchemaError, TypeError, ValueError, LookupError):
        return None


def _schema_error(name: str, schema: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` is refused for tool ``name`` (the result text), or ``None``."""
    if not schema:
        return None
    try:
        validator = _validator(json.dumps(schema, sort_keys=True, separators=(",", ":")))
        # ``None``: the agent's own schema is broken; there is nothing to hold the model to.
        errors = list(validator.iter_errors(value)) if validator is not None else []
    except (Unresolvable, RecursionError) as exc:
        # A valid schema that cannot be applied: a $ref to nothing or to another document, or
        # one that recurses without end or nests past the stack. Nothing checks the call, so it
        # does not run (spec §6).
        reason = (
            "it recurses without end or nests too deeply"
            if isinstance(exc, RecursionError)
            else str(exc)
        )
        return f"tool '{name}' was not run: its input schema cannot be applied ({reason})"
    except (SchemaError, TypeError, ValueError, LookupError):
        return None
    if not errors:
        return None
    error = min(errors, key=lambda e: [str(p) for p in e.absolute_path])
    where = "/".join(str(p) for p in error.absolute_path)
    at = "/" + where if where else "the top level"
    return f"invalid arguments for tool '{name}': {error.message} (at {at})"


def check_call(
    name: str, raw_input: str, tools: dict[str, ToolDefinition]
) -> tuple[str | None, CallResult | None]:
    """``(canonical arguments, None)`` for a call that may run, else ``(None, error result)``."""
    # Arguments past the limits every accepted JSON value keeps (too deep to read back safely,
    # too large) are answered like arguments that are not JSON: the model sees why.
    problem = json_text_problem(raw_input)
    if problem is not None:
        return None, error_result(f"invalid tool input: the arguments' JSON text {problem}")
    try:
        value = jsontext.loads_arguments(raw_input)
    except (ValueError, TypeError) as exc:
        return None, error_result(f"invalid tool input: {exc}")
    tool = tools.get(name)
    if tool is None:
        names = ", ".join(sorted(tools)) or "none"
        return None, error_result(f"tool not found: '{name}' (available tools: {names})")
    if name not in (UPDATE_PLAN, CONVERSATION_HISTORY):  # control tools parse their own
        problem = _schema_error(name, tool["input_schema"], value)
        if problem is not None:
            return None, error_result(problem)
    return jsontext.dumps(value, sort_keys=True), None


async def _update_plan(
    db: AsyncSession, events: EventEmitter, session_id: str, turn_id: str, raw: str
) -> tuple[CallResult, dict[str, object] | None]:
    """The call's result and the turn's new plan (``None`` when the arguments are refused)."""
    try:
        plan = parse_plan(raw)
    except PlanArgumentsInvalid as exc:
        return error_result(exc.detail), None
    stored: dict[str, object] = {
        **plan.to_json(),
        "updated_at": utc_now().isoformat().replace("+00:00", "Z"),
    }
    await events.emit(db, session_id, "plan_updated", stored, turn_id=turn_id)
    return {"state": "success", "output": [text_block(PLAN_UPDATED_TEXT)], "artifacts": []}, stored


async def _conversation_history(db: AsyncSession, session_id: str, raw: str) -> CallResult:
    try:
        from app.services.compaction.history import conversation_history_result
    except ImportError:  # the transcript service is not part of this build
        return error_result("conversation_history is not available in this deployment")
    text, state = await conversation_history_result(db, session_id, raw)
    return {"state": state, "output": [text_block(text)], "artifacts": []}


async def handle_calls(
    db: AsyncSession,
    events: EventEmitter,
    *,
    session_id: str,
    turn_id: str,
    entries: list[CallEntry],
    tools: list[ToolDefinition],
    doom: DoomRecord | None,
    doom_threshold: int,
) -> ToolRound:
    """Check and run (or mark for the caller) each call in order; fills ``entry["result"]``
    for every call decided here. Entries left without a result after a doom loop are the
    "remaining calls" the caller of this function ends with the fixed result."""
    by_name = {t["name"]: t for t in tools}
    waiting = False
    plan: dict[str, Any] | None = None
    for entry in entries:
        name, raw = entry["name"], entry["input"]
        await events.emit(
            db,
            session_id,
            "tool_call_started",
            {"tool_call_id": entry["tool_call_id"], "tool_name": name, "input": raw},
            turn_id=turn_id,
        )
        canonical: str | None = None
        rejected: CallResult | None = None
        if "refused" in entry:  # its arguments were not stored (``entries_of``)
            rejected = error_result(entry["refused"])
        else:
            canonical, rejected = check_call(name, raw, by_name)
        if canonical is None:
            entry["result"] = rejected
        else:
            doom = doom.after(name, canonical) if doom else DoomRecord(name, canonical, 1)
            entry["doom"] = doom.to_json()
            if doom.count >= doom_threshold:
                entry["result"] = error_result(f"doom loop detected for tool '{name}'")
                await events.emit(
                    db, session_id, "tool_call_finished", finished_payload(entry), turn_id=turn_id
                )
                return ToolRound("doom_loop", doom, f"doom loop detected: {name}", plan)
            if name == UPDATE_PLAN:
                entry["result"], updated = await _update_plan(db, events, session_id, turn_id, raw)
                plan = updated or plan
            elif name == CONVERSATION_HISTORY:
                entry["result"] = await _conversation_history(db, session_id, raw)
            else:
                entry["caller"] = True
                waiting = True
                continue
        await events.emit(
            db, session_id, "tool_call_finished", finished_payload(entry), turn_id=turn_id
        )
    return ToolRound("wait" if waiting else "continue", doom, plan=plan)
