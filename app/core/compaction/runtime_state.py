"""Durable runtime state carried across a compaction (spec §7.5).

``edited_paths`` is re-derived from *all* stored messages every time (never from the previous
state), so a path edited before an earlier compaction is still listed. ``extensions`` holds
versioned values by key: ``turn_plan`` is this service's; every other key was written by someone
else (a newer version, another service) and is carried over untouched and never rendered.

``turn_plan`` is the session's latest plan for every kind of compaction (spec §9): the running
turn's, else the last plan an ``update_plan`` call set in the stored messages (``latest_plan``),
else the previous checkpoint's. A manual compaction after the turn that made a plan used to find
no earlier checkpoint to carry it from and lost it (spec §9.2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.content import Item
from app.core.errors import InvalidInput
from app.core.turn_plan import Plan, PlanArgumentsInvalid, parse_update_plan_arguments

__all__ = [
    "ARTIFACT_SKIPPED",
    "MAX_EDITED_PATHS",
    "MAX_PATH_CHARS",
    "MAX_WARNINGS",
    "RUNTIME_STATE_SCHEMA_VERSION",
    "TURN_PLAN_KEY",
    "Extension",
    "RuntimeState",
    "RuntimeStateError",
    "UndecodableArtifact",
    "derive_runtime_state",
    "edited_paths",
    "file_change_path",
    "latest_plan",
    "runtime_state_from_json",
    "runtime_state_to_json",
    "turn_plan_of",
]

RUNTIME_STATE_SCHEMA_VERSION = 1
TURN_PLAN_KEY = "turn_plan"
TURN_PLAN_SCHEMA_VERSION = 1
MAX_EDITED_PATHS = 128
MAX_PATH_CHARS = 1024
MAX_WARNINGS = 32
ARTIFACT_SKIPPED = "artifact_skipped"


class RuntimeStateError(InvalidInput):
    """The runtime state cannot be built: the compaction fails (code ``compaction_error``)."""

    def __init__(self, detail: str) -> None:
        super().__init__("compaction_error", detail)


class UndecodableArtifact(ValueError):
    """An artifact ``file_change_path`` cannot read; its message says which field is wrong.

    A ``ValueError`` so that the API's content schema reports it as a field error as is.
    """


@dataclass(frozen=True, slots=True)
class Extension:
    schema_version: int
    value: Any


@dataclass(frozen=True, slots=True)
class RuntimeState:
    edited_paths: tuple[str, ...] = ()
    extensions: Mapping[str, Extension] = field(default_factory=dict)
    warnings: tuple[Mapping[str, str], ...] = ()
    schema_version: int = RUNTIME_STATE_SCHEMA_VERSION


def edited_paths(
    messages: Iterable[Item], *, skipped: list[Mapping[str, str]] | None = None
) -> tuple[str, ...]:
    """Paths of ``file_change`` artifacts that were not undone: cut, deduplicated, sorted, capped.

    Paths are cut to 1024 characters *before* deduplication (two long paths with one prefix
    are one entry) and sorted by code point, which is the byte order of their UTF-8.

    An artifact that cannot be decoded is skipped, and a warning saying which and why is added
    to ``skipped`` (at most ``MAX_WARNINGS``). Appends refuse such artifacts, but rows stored
    before that rule stay forever: failing on them would fail every later compaction and rewind
    of their session, so they are reported instead (spec §7.5's ``warnings``).
    """
    found: set[str] = set()
    for item in messages:
        for block in item.content:
            if block["type"] != "tool_result":
                continue
            artifacts: object = block.get("artifacts", [])
            if not isinstance(artifacts, list):
                _skip(skipped, item, "invalid tool result artifacts: expected a list")
                continue
            for artifact in artifacts:
                try:
                    path = file_change_path(artifact)
                except UndecodableArtifact as exc:
                    _skip(skipped, item, str(exc))
                    continue
                if path is not None:
                    found.add(path)
    return tuple(sorted(found)[:MAX_EDITED_PATHS])


def _skip(skipped: list[Mapping[str, str]] | None, item: Item, reason: str) -> None:
    if skipped is None or len(skipped) >= MAX_WARNINGS:
        return
    where = f"message {item.sequence}" if item.sequence is not None else "a message"
    skipped.append(
        {"code": ARTIFACT_SKIPPED, "message": f"{where}: {reason}; the artifact was skipped"}
    )


def file_change_path(artifact: object) -> str | None:
    """The edited path ``artifact`` records, cut; ``None`` for another kind, undone or blank.

    The one definition of a decodable artifact (spec §7.5): the API refuses at append time what
    this refuses, because a stored message that fails it would fail every later compaction of
    the session. Raises ``UndecodableArtifact``.
    """
    if not isinstance(artifact, Mapping) or not isinstance(artifact.get("kind"), str):
        raise UndecodableArtifact("invalid artifact: expected an object with a string kind")
    if artifact["kind"] != "file_change":
        return None
    payload = artifact.get("payload")
    if not isinstance(payload, Mapping):
        raise UndecodableArtifact("invalid file_change artifact: payload must be an object")
    path, undone = payload.get("path"), payload.get("undone", False)
    if not isinstance(path, str):
        raise UndecodableArtifact("invalid file_change artifact: payload.path must be a string")
    if not isinstance(undone, bool):
        raise UndecodableArtifact("invalid file_change artifact: payload.undone must be a boolean")
    if undone or not path.strip():
        return None
    return path[:MAX_PATH_CHARS]


def latest_plan(messages: Iterable[Item]) -> Plan | None:
    """The plan the last successful ``update_plan`` call in ``messages`` set (spec §6).

    A call counts once its result is stored with state ``success`` (the runner answers
    ``Plan updated``); invalid arguments got an ``invalid_arguments`` error result and changed
    nothing. ``messages`` in sequence order.
    """
    calls: dict[str, Plan] = {}
    plan: Plan | None = None
    for item in messages:
        for block in item.content:
            if block["type"] == "tool_call" and block["name"] == "update_plan":
                try:
                    calls[block["id"]] = parse_update_plan_arguments(block["input"])
                except (InvalidInput, RecursionError):  # refused by the turn: no plan set
                    continue
            elif block["type"] == "tool_result" and block["state"] == "success":
                plan = calls.pop(block["id"], plan)
    return plan


def derive_runtime_state(
    messages: Sequence[Item], previous: RuntimeState | None, plan: Plan | None
) -> RuntimeState:
    """The state to store with a new checkpoint.

    ``messages``: every stored message of the session, in sequence order. ``previous``: the
    latest checkpoint's state (``None`` before the first). ``plan``: the running turn's plan, if
    it has one; otherwise the session's latest (``latest_plan``), otherwise the previous
    ``turn_plan`` is carried. Warnings are derived anew: the artifacts ``edited_paths`` skipped.
    """
    extensions = dict(previous.extensions) if previous is not None else {}
    if plan is None:
        plan = latest_plan(messages)
    if plan is not None:
        extensions[TURN_PLAN_KEY] = Extension(TURN_PLAN_SCHEMA_VERSION, plan.to_extension_value())
    skipped: list[Mapping[str, str]] = []
    paths = edited_paths(messages, skipped=skipped)
    state = RuntimeState(edited_paths=paths, extensions=extensions, warnings=tuple(skipped))
    turn_plan_of(state)  # a carried plan that cannot be rendered fails now, not at install
    return state


def turn_plan_of(state: RuntimeState) -> Plan | None:
    """The ``turn_plan`` extension as a ``Plan``; ``RuntimeStateError`` when malformed."""
    ext = state.extensions.get(TURN_PLAN_KEY)
    if ext is None:
        return None
    if ext.schema_version != TURN_PLAN_SCHEMA_VERSION:
        raise RuntimeStateError(f"unsupported turn_plan schema version: {ext.schema_version}")
    try:
        return Plan.from_extension_value(ext.value)
    except PlanArgumentsInvalid as exc:
        raise RuntimeStateError(f"invalid turn_plan extension: {exc.detail}") from exc


def runtime_state_to_json(state: RuntimeState) -> dict[str, Any]:
    """The stored JSON shape of spec §7.5 (snake_case, extensions by sorted key)."""
    return {
        "schema_version": state.schema_version,
        "edited_paths": list(state.edited_paths),
        "extensions": {
            key: {"schema_version": ext.schema_version, "value": ext.value}
            for key, ext in sorted(state.extensions.items())
        },
        "warnings": [dict(w) for w in state.warnings],
    }


def runtime_state_from_json(value: object) -> RuntimeState:
    """Read a stored state; an unknown schema version or shape raises ``RuntimeStateError``."""
    if not isinstance(value, Mapping):
        raise RuntimeStateError("stored runtime state must be an object")
    version = value.get("schema_version")
    if version != RUNTIME_STATE_SCHEMA_VERSION:
        raise RuntimeStateError(f"unsupported compaction runtime state schema version: {version}")
    paths = value.get("edited_paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise RuntimeStateError("stored runtime state edited_paths must be a list of strings")
    raw_ext = value.get("extensions", {})
    if not isinstance(raw_ext, Mapping):
        raise RuntimeStateError("stored runtime state extensions must be an object")
    extensions: dict[str, Extension] = {}
    for key, ext in raw_ext.items():
        if (
            not isinstance(ext, Mapping)
            or not isinstance(ext.get("schema_version"), int)
            or isinstance(ext.get("schema_version"), bool)
            or "value" not in ext
        ):
            raise RuntimeStateError(
                f"stored runtime state extension {key!r} needs schema_version and value"
            )
        extensions[str(key)] = Extension(ext["schema_version"], ext["value"])
    warnings = value.get("warnings", [])
    if not isinstance(warnings, list) or not all(
        isinstance(w, Mapping) and all(isinstance(v, str) for v in w.values()) for w in warnings
    ):
        raise RuntimeStateError("stored runtime state warnings must be a list of objects")
    return RuntimeState(
        edited_paths=tuple(paths),
        extensions=extensions,
        warnings=tuple(dict(w) for w in warnings),
    )
