"""SKILL.md text rules (spec §4 catalog, §6 skill_instruction): pure parsing, no I/O.

The front matter is a small YAML subset, parsed here so the core stays standard-library only:
top-level ``key: value`` pairs with plain, single- or double-quoted scalars (continued on
indented lines), ``|`` / ``>`` block scalars, and nested values that are skipped. Only ``name``
and ``description`` are read; everything else (license, metadata, allowed-tools ...) is ignored.
Block-scalar chomping indicators are accepted and all trailing line breaks dropped: both fields
are single-line after whitespace collapsing, so the difference is never visible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from app.core.content import Item, text_block

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "SkillFileError",
    "SkillText",
    "is_valid_skill_name",
    "normalize_description",
    "parse_skill_file",
    "skill_instruction_item",
    "skill_instruction_text",
    "strip_front_matter",
]

MAX_DESCRIPTION_CHARS = 1024

# 1-64 characters of [a-z0-9-], first and last alphanumeric. re.ASCII keeps \d etc. out of it.
_SKILL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?", re.ASCII)
_KEY_LINE = re.compile(r"([A-Za-z0-9_.-]+)[ \t]*:(?:[ \t]+(.*))?")
_BLOCK_INDICATOR = re.compile(r"[|>](?:[1-9][+-]?|[+-][1-9]?)?(?:[ \t]+#.*)?")
_NESTED_LINE = re.compile(r"(?:- |-$|[^\s#][^:]*:(?:\s|$))")
_DQ_ESCAPES: Final = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_DQ_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", re.DOTALL)


class SkillFileError(ValueError):
    """A SKILL.md that cannot be a skill; the message says why (it is logged, then skipped)."""


@dataclass(frozen=True, slots=True)
class SkillText:
    name: str
    description: str
    body: str


def is_valid_skill_name(name: str) -> bool:
    return _SKILL_NAME.fullmatch(name) is not None


def normalize_description(text: str) -> str:
    """Whitespace runs collapsed to one space, ends trimmed, cut to 1024 characters."""
    return " ".join(text.split())[:MAX_DESCRIPTION_CHARS]


def _split_front_matter(text: str) -> tuple[list[str] | None, str]:
    """(front matter lines or ``None`` when there is none, the text after it)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    first, sep, _ = text.partition("\n")
    if first.rstrip() != "---" or not sep:
        return None, text
    lines: list[str] = []
    offset = len(first) + 1
    while offset <= len(text):
        end = text.find("\n", offset)
        line = text[offset:] if end == -1 else text[offset:end]
        next_offset = len(text) + 1 if end == -1 else end + 1
        if line.rstrip() in ("---", "..."):
            return lines, text[next_offset:]
        lines.append(line.removesuffix("\r"))
        offset = next_offset
    raise SkillFileError("front matter is not closed by a '---' line")


def strip_front_matter(text: str) -> str:
    """The body a ``skill_instruction`` carries: front matter removed, blank edges trimmed.

    Only line breaks at the very start and end are trimmed (the blank line that usually follows
    the front matter, and the file's final newline); everything in between is kept verbatim.
    """
    try:
        _, body = _split_front_matter(text)
    except SkillFileError:
        body = text
    return body.strip("\r\n")


def _unquote_double(raw: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code in _DQ_ESCAPES:
            return _DQ_ESCAPES[code]
        raise SkillFileError(f"unknown escape \\{code} in a double-quoted value")

    return _DQ_ESCAPE.sub(replace, raw)


def _quoted(first: str, continuation: list[str]) -> str:
    # A quoted scalar may span lines; its line breaks fold to spaces.
    joined = " ".join([first.strip(), *(line.strip() for line in continuation)]).rstrip()
    quote = joined[0]
    body, close, trailing = joined[1:].rpartition(quote)
    if not close or (trailing.strip() and not trailing.strip().startswith("#")):
        raise SkillFileError("a quoted front matter value is not closed")
    if quote == "'":
        return body.replace("''", "'")
    return _unquote_double(body)


def _plain(first: str, continuation: list[str]) -> str:
    parts = []
    for line in [first, *continuation]:
        # In a plain scalar " #" (or "#" at the start) begins a comment.
        padded = " " + line
        cut = padded.find(" #")
        parts.append((padded if cut == -1 else padded[:cut]).strip())
    return " ".join(p for p in parts if p)


def _block(indicator: str, continuation: list[str]) -> str:
    indents = [len(line) - len(line.lstrip()) for line in continuation if line.strip()]
    cut = min(indents, default=0)
    lines = [line[cut:] if line.strip() else "" for line in continuation]
    if indicator.startswith("|"):
        return "\n".join(lines).rstrip("\n")
    return " ".join(line for line in lines if line).strip()


def _parse_front_matter(lines: list[str]) -> dict[str, str | None]:
    """Top-level keys → scalar text, or ``None`` for a nested (non-scalar) value."""
    fields: dict[str, str | None] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY_LINE.fullmatch(line.rstrip())
        if match is None or line[0] in " \t":
            raise SkillFileError(f"front matter line {index + 1} is not a top-level 'key: value'")
        key, first = match.group(1), (match.group(2) or "").strip()
        continuation: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][0] in " \t"):
            continuation.append(lines[index])
            index += 1
        while continuation and not continuation[-1].strip():
            continuation.pop()
        if key in fields:
            raise SkillFileError(f"front matter key {key!r} appears twice")
        value: str | None
        if _BLOCK_INDICATOR.fullmatch(first):
            value = _block(first, continuation)
        elif first[:1] in ("'", '"'):
            value = _quoted(first, continuation)
        elif not first and any(_NESTED_LINE.match(c.strip()) for c in continuation):
            value = None  # a nested mapping or list
        else:
            value = _plain(first, continuation)
        fields[key] = value
    return fields


def parse_skill_file(dir_name: str, text: str) -> SkillText:
    """Name, description and body of the SKILL.md found in directory ``dir_name``.

    Raises ``SkillFileError`` when the file cannot be a skill: no front matter, a ``name`` that
    differs from the directory (a missing name defaults to it), or no description.
    """
    lines, _ = _split_front_matter(text)
    if lines is None:
        raise SkillFileError("SKILL.md has no front matter (it must start with a '---' line)")
    fields = _parse_front_matter(lines)
    if "name" in fields and fields["name"] is None:
        raise SkillFileError("front matter 'name' must be a string")
    name = fields.get("name") or dir_name
    if name != dir_name:
        raise SkillFileError(
            f"front matter name {name!r} differs from its directory name {dir_name!r}"
        )
    raw_description = fields.get("description")
    description = normalize_description(raw_description) if raw_description else ""
    if not description:
        raise SkillFileError("front matter 'description' is missing or empty")
    return SkillText(name=name, description=description, body=strip_front_matter(text))


def skill_instruction_text(name: str, path: str, body: str) -> str:
    """The ``skill_instruction`` message text of spec §6 (``body`` without front matter)."""
    return f"<skill>\n<name>{name}</name>\n<path>{path}</path>\n{body}\n</skill>"


def skill_instruction_item(name: str, path: str, body: str) -> Item:
    """A user-role ``skill_instruction`` message, a snapshot of the skill as selected."""
    return Item(
        role="user",
        kind="skill_instruction",
        content=[text_block(skill_instruction_text(name, path, body))],
    )
