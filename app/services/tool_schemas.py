"""Agent tool input schemas, checked when a session is created (spec §6 tool calls).

A tool call is validated against its tool's ``input_schema``. A ``$ref`` in that schema that
resolves to nothing (a JSON pointer to no subschema, an anchor nobody declares, or another
document: the service never fetches one) cannot be applied: a turn would give every call of the
tool an error result and the model could never use it. Such a schema is refused up front, with
the tool and the reference named, instead of being found out call by call.

The walk follows the dialect's own keywords (``referencing`` knows which keywords hold
subschemas in each draft), so a property *named* ``$ref`` or a ``$ref`` key inside ``enum`` or
``const`` data is not taken for a reference, and ``$id`` changes the base of the references
below it exactly as validation resolves them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import (
    CannotDetermineSpecification,
    InvalidAnchor,
    NoSuchAnchor,
    PointerToNowhere,
    Unresolvable,
)
from referencing.jsonschema import DRAFT202012, Schema, SchemaResource, UnknownDialect

__all__ = ["unresolvable_reference"]

# What a validator follows while it validates (``$recursiveRef`` of draft 2019-09 always names
# the root or a recursive anchor, and resolves whenever the schema is a schema).
_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")


def _references(resource: SchemaResource, base: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(reference, resolver at its place)`` of the schema, depth first."""
    contents = resource.contents
    if isinstance(contents, Mapping):
        for keyword in _REFERENCE_KEYWORDS:
            reference = contents.get(keyword)
            if isinstance(reference, str):
                yield reference, base
    for sub in resource.subresources():
        # A list where a draft wants a subschema (draft 4's ``items: [...]`` under 2020-12)
        # breaks the schema, not its references; validation ignores such a schema.
        if isinstance(sub.contents, Mapping):
            yield from _references(sub, base.in_subresource(sub))


def unresolvable_reference(schema: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(reference, why)`` for the first reference of ``schema`` that resolves to nothing
    (nothing is fetched), or ``None`` when every reference resolves within the schema.

    The dialect is the schema's ``$schema``, else draft 2020-12: the one the turn's validator
    picks for it."""
    contents = dict[str, Any](schema)
    try:
        root: SchemaResource = Resource.from_contents(contents, default_specification=DRAFT202012)
    except (UnknownDialect, CannotDetermineSpecification, TypeError, AttributeError):
        # An unknown (or not a string) ``$schema``: validation falls back to the latest draft.
        root = DRAFT202012.create_resource(contents)
    registry: Registry[Schema] = Registry().with_resource(root.id() or "", root)
    resolver = registry.resolver(base_uri=root.id() or "")
    for reference, at in _references(root, resolver):
        try:
            at.lookup(reference)
        except Unresolvable as exc:
            return reference, _why(exc)
    return None


def _why(exc: Unresolvable) -> str:
    # Said without the schema itself (referencing's own messages quote all of it).
    if isinstance(exc, PointerToNowhere):
        return f"the JSON pointer {exc.ref!r} points to nothing in the schema"
    if isinstance(exc, NoSuchAnchor | InvalidAnchor):
        return f"no subschema declares the anchor {exc.anchor!r}"
    return "it names another document, and the service never fetches one"
