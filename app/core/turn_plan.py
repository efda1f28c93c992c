"""The turn plan and the server-side ``update_plan`` tool (spec §6).

The model keeps a short checklist with ``update_plan``; the runner validates the arguments here,
stores the plan and answers ``Plan updated``. Invalid arguments are never trimmed: they raise
``PlanArgumentsInvalid`` (code ``invalid_arguments``), which the runner turns into a failed tool
result the model sees, and the turn continues. The error texts are the original runtime's
(0-based step indexes), so a model tuned on them reads the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, cast, get_args

from app.core.errors import InvalidInput
from app.core.jsontext import loads_arguments
from app.core.pipeline.prepared_call import ToolDefinition

__all__ = [
    "MAX_PLAN_STEPS",
    "MAX_STEP_CHARS",
    "PLAN_UPDATED_TEXT",
    "UPDATE_PLAN_TOOL",
    "Plan",
    "PlanArgumentsInvalid",
    "PlanStep",
    "StepStatus",
    "parse_update_plan_arguments",
]

StepStatus = Literal["pending", "in_progress", "completed"]
_STATUSES: frozenset[str] = frozenset(get_args(StepStatus))

MAX_PLAN_STEPS = 128
MAX_STEP_CHARS = 1024
PLAN_UPDATED_TEXT = "Plan updated"


class PlanArgumentsInvalid(InvalidInput):
    """``update_plan`` arguments the runner must refuse with an ``invalid_arguments`` result."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_arguments", detail, tool="update_plan")


@dataclass(frozen=True, slots=True)
class PlanStep:
    step: str
    status: StepStatus


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated plan; ``steps == ()`` is a cleared plan (``plan: []``)."""

    explanation: str | None
    steps: tuple[PlanStep, ...]

    def to_json(self) -> dict[str, Any]:
        """The tool's own shape ``{explanation, plan}`` (events, API)."""
        return {"explanation": self.explanation, "plan": _steps_json(self.steps)}

    def to_extension_value(self) -> dict[str, Any]:
        """The ``turn_plan`` runtime-state value ``{explanation, steps}`` (spec §7.5)."""
        return {"explanation": self.explanation, "steps": _steps_json(self.steps)}

    @classmethod
    def from_extension_value(cls, value: object) -> Plan:
        """Read a stored ``turn_plan`` value; raises ``PlanArgumentsInvalid`` when malformed."""
        if not isinstance(value, Mapping):
            raise PlanArgumentsInvalid("turn_plan value must be an object")
        return _validate({"explanation": value.get("explanation"), "plan": value.get("steps")})

    @property
    def unfinished_step_count(self) -> int:
        return sum(1 for s in self.steps if s.status != "completed")


def _steps_json(steps: tuple[PlanStep, ...]) -> list[dict[str, str]]:
    return [{"step": s.step, "status": s.status} for s in steps]


def parse_update_plan_arguments(arguments: str | Mapping[str, Any]) -> Plan:
    """Validate ``update_plan`` arguments (raw JSON text or an already decoded object)."""
    if isinstance(arguments, str):
        try:
            arguments = loads_arguments(arguments)
        except ValueError as exc:
            raise PlanArgumentsInvalid(f"failed to parse update_plan arguments: {exc}") from exc
    return _validate(arguments)


def _parse_error(what: str) -> PlanArgumentsInvalid:
    return PlanArgumentsInvalid(f"failed to parse update_plan arguments: {what}")


def _validate(arguments: object) -> Plan:
    if not isinstance(arguments, Mapping):
        raise _parse_error("expected an object")
    unknown = sorted(set(arguments) - {"explanation", "plan"})
    if unknown:
        raise _parse_error(f"unknown field `{unknown[0]}`, expected `explanation` or `plan`")
    explanation = arguments.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise _parse_error("`explanation` must be a string")
    if "plan" not in arguments:
        raise _parse_error("missing field `plan`")
    raw_steps = arguments["plan"]
    if not isinstance(raw_steps, list):
        raise _parse_error("`plan` must be an array")
    # The count is checked before anything else so a huge plan is refused cheaply.
    if len(raw_steps) > MAX_PLAN_STEPS:
        raise PlanArgumentsInvalid(f"plan must not exceed {MAX_PLAN_STEPS} steps")
    steps = tuple(_step(i, raw) for i, raw in enumerate(raw_steps))
    running = [i for i, s in enumerate(steps) if s.status == "in_progress"]
    if len(running) > 1:
        raise PlanArgumentsInvalid(
            "at most one step may be in_progress, but steps "
            f"{running[0]} and {running[1]} are both in_progress"
        )
    return Plan(explanation=explanation, steps=steps)


def _step(index: int, raw: object) -> PlanStep:
    if not isinstance(raw, Mapping):
        raise _parse_error(f"plan step {index} must be an object")
    unknown = sorted(set(raw) - {"step", "status"})
    if unknown:
        raise _parse_error(f"unknown field `{unknown[0]}` in plan step {index}")
    text, status = raw.get("step"), raw.get("status")
    if not isinstance(text, str):
        raise _parse_error(f"plan step {index} needs a string `step`")
    if not isinstance(status, str) or status not in _STATUSES:
        raise _parse_error(
            f"plan step {index} status must be one of pending, in_progress, completed"
        )
    if not text.strip():
        raise PlanArgumentsInvalid(f"plan step {index} must not be blank")
    # Unicode characters (code points), as the original counted them.
    if len(text) > MAX_STEP_CHARS:
        raise PlanArgumentsInvalid(f"plan step {index} exceeds {MAX_STEP_CHARS} characters")
    return PlanStep(step=text, status=cast(StepStatus, status))


UPDATE_PLAN_TOOL: Final[ToolDefinition] = {
    "name": "update_plan",
    "description": (
        "Record or update the checklist for the current task. Send the complete plan every "
        "time: each call replaces the previous one, and an empty list clears it. Use it for "
        "work with several meaningful steps, keep exactly one step in_progress while you work "
        "on it, and mark steps completed as soon as they are done. At most 128 steps of at "
        f"most 1024 characters each. The result is the text `{PLAN_UPDATED_TEXT}`."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "explanation": {
                "type": "string",
                "description": "Optional short note on why the plan changed.",
            },
            "plan": {
                "type": "array",
                "description": "The full list of steps, in order.",
                "maxItems": MAX_PLAN_STEPS,
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "minLength": 1, "maxLength": MAX_STEP_CHARS},
                        "status": {
                            "type": "string",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                    },
                    "required": ["step", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
}
