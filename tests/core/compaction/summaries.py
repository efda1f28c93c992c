"""Builders of summary texts for the validation tests."""

from __future__ import annotations

from collections.abc import Sequence

from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN

FILLER = "The user asked to fix the flaky login test in auth/session.py and keep the API stable."


def summary(
    headings: Sequence[str] = SUMMARY_HEADINGS,
    *,
    bodies: Sequence[str] | None = None,
    filler: str = FILLER,
) -> str:
    """A summary with one content line per heading (``bodies`` overrides them)."""
    lines = [SUMMARY_ROOT_OPEN]
    for i, heading in enumerate(headings):
        lines.append(heading)
        body = bodies[i] if bodies is not None else filler
        if body:
            lines.append(body)
    lines.append(SUMMARY_ROOT_CLOSE)
    return "\n".join(lines)


def summary_of_length(length: int, pad: str = "x") -> str:
    """A valid-shaped summary of exactly ``length`` characters (pads section 9)."""
    base = summary(bodies=["None"] * 9)
    missing = length - len(base)
    assert missing >= 0, "length below the bare skeleton"
    bodies = ["None"] * 8 + ["None" + pad * missing]
    text = summary(bodies=bodies)
    assert len(text) == length
    return text
