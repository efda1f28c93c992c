"""A tool result's state as the model reads it (spec §9.5, "Tool state on the wire").

A result posted as ``error``, ``denied`` or ``interrupted`` must be recognizable as such by the
model in every encoding, and no tool message may be sent empty. The prepared request keeps the
result as it is (its ``state`` field says everything); the encodings add, for the model:

- before the output of a non-success result, one *state line*: ``[tool state: error]``,
  ``[tool state: denied]`` or ``[tool state: interrupted]`` (Anthropic also sets ``is_error``);
- for a successful result without output (no block, or only empty text), ``[no output]``.

Both are fixed texts derived from the block alone, so the same result always encodes to the same
bytes. The exact counters count them (``added_text``), so the budget counts what is sent; the
estimate measures the prepared JSON, whose ``"state"`` and block keys are always longer than
what is added (a test checks it), so it never falls short of the sent text either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from app.core.content import OutputBlock, ToolResultBlock

__all__ = ["NO_OUTPUT_TEXT", "STATE_LINES", "added_text", "has_output", "state_line"]

STATE_LINES: Final[dict[str, str]] = {
    "error": "[tool state: error]",
    "denied": "[tool state: denied]",
    "interrupted": "[tool state: interrupted]",
}
NO_OUTPUT_TEXT = "[no output]"


def state_line(state: str) -> str | None:
    """The line that precedes a non-success result's output; ``None`` for ``success``."""
    return STATE_LINES.get(state)


def has_output(output: Sequence[OutputBlock]) -> bool:
    """Whether anything of ``output`` reaches the model (empty text blocks do not)."""
    return any(b["type"] != "text" or b["text"] for b in output)


def added_text(result: ToolResultBlock) -> str:
    """The text the encodings add to ``result`` for the model ("" when none).

    The state line is followed by a newline when output follows it (OpenAI sends one string).
    """
    line = state_line(result["state"])
    if line is not None:
        return f"{line}\n" if has_output(result["output"]) else line
    return "" if has_output(result["output"]) else NO_OUTPUT_TEXT
