"""Which World State messages a sampling sends (spec §4 diff table), and their baselines.

A *baseline* is the last body the model was given for a section, stored per session and section:
a key that is missing means "no baseline" (never sent, or the record was lost); a value of
``None`` means the last thing sent was the removal notice (the section is known to be absent).

Whether the model can still see an earlier version is decided from the Conversation itself: a
section is *retained* when some ``world_state`` item's text starts with the section's open tag,
or with its replacement notice + blank line + open tag, or equals its removal notice. Only
``kind == "world_state"`` counts, so a user who types the same tags changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.core.content import Item, Origin, RealOrigin, text_block
from app.core.world_state.render import RenderedSection
from app.core.world_state.sections import SECTIONS, SectionSpec, section_spec

__all__ = [
    "SectionMessage",
    "advance_baselines",
    "diff_sections",
    "retained_sections",
    "world_state_item",
    "world_state_message_id",
]


@dataclass(frozen=True, slots=True)
class SectionMessage:
    """One message to send: its text, and the section's baseline once it is stored."""

    section_id: str
    text: str
    body: str | None


def _is_section_text(spec: SectionSpec, text: str) -> bool:
    if text.startswith(spec.open_tag) or text == spec.removal_notice:
        return True
    prefix = spec.replacement_notice + "\n\n"
    return text.startswith(prefix) and text.startswith(spec.open_tag, len(prefix))


def retained_sections(conversation: Iterable[Item]) -> frozenset[str]:
    """Ids of the sections some ``world_state`` item of ``conversation`` still shows."""
    found: set[str] = set()
    for item in conversation:
        if item.kind != "world_state":
            continue
        for block in item.content:
            if block["type"] != "text":
                continue
            for spec in SECTIONS:
                if spec.section_id not in found and _is_section_text(spec, block["text"]):
                    found.add(spec.section_id)
    return frozenset(found)


def diff_sections(
    rendered: Sequence[RenderedSection],
    baselines: Mapping[str, str | None],
    conversation: Sequence[Item],
) -> list[SectionMessage]:
    """The messages to send now, in section order. Read-only: nothing is advanced here.

    spec §4's table, per section:

    - not retained (compacted away, or never sent): body alone when present, else nothing;
    - retained and the baseline equals the body (``None`` equals a known absence): nothing;
    - retained otherwise (different body, or no baseline as after a lost record): replacement
      notice + blank line + body, or the removal notice when the body is absent.
    """
    retained = retained_sections(conversation)
    messages: list[SectionMessage] = []
    for section in rendered:
        spec = section_spec(section.section_id)
        body = section.body
        if spec.section_id not in retained:
            if body is not None:
                messages.append(SectionMessage(spec.section_id, body, body))
            continue
        if spec.section_id in baselines and baselines[spec.section_id] == body:
            continue
        if body is None:
            messages.append(SectionMessage(spec.section_id, spec.removal_notice, None))
        else:
            text = f"{spec.replacement_notice}\n\n{body}"
            messages.append(SectionMessage(spec.section_id, text, body))
    return messages


def advance_baselines(
    baselines: Mapping[str, str | None], written: Iterable[SectionMessage]
) -> dict[str, str | None]:
    """The baselines once every message of ``written`` is stored; other sections keep theirs.

    Call it only after all writes succeeded: a failed write must leave the old baselines, so
    that the next sampling sends the same messages again.
    """
    advanced = dict(baselines)
    for message in written:
        advanced[message.section_id] = message.body
    return advanced


def world_state_message_id(
    turn_id: str, model_call_index: int, sample_index: int, section_id: str
) -> str:
    """The idempotency id of a World State message (insert-if-absent makes a retry harmless)."""
    return f"world-state:{turn_id}:{model_call_index}:{sample_index}:{section_id}"


def world_state_item(text: str, origin: Origin | None = None) -> Item:
    """A user-role ``world_state`` message with one text block."""
    return Item(
        role="user",
        kind="world_state",
        content=[text_block(text)],
        origin=origin if origin is not None else RealOrigin(),
    )
