"""Validation of a summary answer (spec §7.4).

A summary is stored and later replayed to the model as conversation context, so it must have
exactly the agreed shape and must not smuggle in anything that reads like a control message.
Any failure raises ``SummaryInvalid`` (classification ``degenerate``); nothing is repaired.
"""

from __future__ import annotations

from typing import ClassVar, Final

from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN
from app.core.errors import ErrorKind, InvalidInput

__all__ = [
    "CONTROL_TAGS",
    "MIN_SUMMARY_CHARS",
    "SummaryInvalid",
    "find_control_tag",
    "validate_summary",
]

MIN_SUMMARY_CHARS = 500

_TAG_NAMES = (
    "conversation_summary",
    "system",
    "developer",
    "instructions",
    "system_reminder",
    "tool",
    "assistant",
    "user_query",
)
# Open and closing forms, matched as prefixes: ``<tool`` also catches ``<tool_call>``.
CONTROL_TAGS: tuple[str, ...] = tuple(
    form for name in _TAG_NAMES for form in (f"<{name}", f"</{name}")
)

# ASCII-only lowering, as the original did: ``str.lower`` would also fold non-ASCII letters.
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class SummaryInvalid(InvalidInput):
    """The summary text or response breaks the contract.

    Code ``invalid_summary`` (422 when a caller posts its own summary, §7.8); inside the
    service's retry loop it is the ``degenerate`` failure class. ``reason`` is the rule that
    failed, in words.
    """

    kind: ClassVar[ErrorKind] = "unprocessable"
    classification = "degenerate"

    def __init__(self, reason: str) -> None:
        super().__init__(
            "invalid_summary",
            f"the summary is invalid: {reason}; return exactly one "
            f"{SUMMARY_ROOT_OPEN} block with the nine headings in order",
            classification=self.classification,
            reason=reason,
        )
        self.reason = reason


def find_control_tag(text: str) -> str | None:
    """The first control tag (open or closing form) ``text`` contains, case-insensitive."""
    lowered = text.translate(_ASCII_LOWER)
    for tag in CONTROL_TAGS:
        if tag in lowered:
            return tag
    return None


def validate_summary(text: str, *, finish_reason: str, has_tool_calls: bool) -> str:
    """Return the summary to store (root through closing tag) or raise ``SummaryInvalid``."""
    if has_tool_calls:
        raise SummaryInvalid("the response requested a tool call")
    if finish_reason != "stop":
        raise SummaryInvalid(f"finish reason was {finish_reason}")
    trimmed = text.strip()
    start = trimmed.find(SUMMARY_ROOT_OPEN)
    if start < 0:
        raise SummaryInvalid("missing conversation_summary root")
    # Text before the root (a preface, a thinking leak) is dropped, never validated.
    rest = trimmed[start:]
    if rest.count(SUMMARY_ROOT_OPEN) != 1 or rest.count(SUMMARY_ROOT_CLOSE) != 1:
        raise SummaryInvalid("conversation_summary must have exactly one root")
    end = rest.index(SUMMARY_ROOT_CLOSE) + len(SUMMARY_ROOT_CLOSE)
    # ``rest`` is stripped, so anything after the closing tag is non-whitespace.
    if end != len(rest):
        raise SummaryInvalid("unexpected content after conversation_summary root")
    body = rest[len(SUMMARY_ROOT_OPEN) : end - len(SUMMARY_ROOT_CLOSE)]
    tag = find_control_tag(body)
    if tag is not None:
        raise SummaryInvalid(f"summary contained forbidden control tag {tag}")
    _check_sections(body)
    if len(rest) < MIN_SUMMARY_CHARS:
        raise SummaryInvalid(f"summary was shorter than {MIN_SUMMARY_CHARS} characters")
    return rest


def _check_sections(body: str) -> None:
    filled: list[bool] = []
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            if len(filled) == len(SUMMARY_HEADINGS):
                raise SummaryInvalid("summary contained more than nine headings")
            expected = SUMMARY_HEADINGS[len(filled)]
            if line != expected:
                raise SummaryInvalid(
                    f"summary heading was missing, unknown, or out of order; expected: {expected}"
                )
            filled.append(False)
        elif line:
            if not filled:
                raise SummaryInvalid("summary contained content before the first heading")
            filled[-1] = True
    if len(filled) != len(SUMMARY_HEADINGS):
        raise SummaryInvalid(f"summary contained {len(filled)} of 9 required headings")
    for heading, has_content in zip(SUMMARY_HEADINGS, filled, strict=True):
        if not has_content:
            raise SummaryInvalid(f"summary section had no content: {heading}")
