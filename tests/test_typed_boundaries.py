"""Services take typed commands and return typed results (docs/architecture.md, "Typed
boundaries"): the count of service functions whose signature carries ``dict[str, Any]`` can only
fall.

``scripts/count_untyped.py`` walks the parsed source of ``app/services``; ``FREE_FORM`` names the
functions whose ``dict[str, Any]`` really is free-form JSON (a tool's arguments, a caller's
metadata, a provider's payload), each with the reason. Every other one counts against
``CEILING``: lower it when you type a signature, never raise it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "count_untyped.py"
_spec = importlib.util.spec_from_file_location("count_untyped", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
count_untyped = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = count_untyped  # its dataclass looks its module up by name
_spec.loader.exec_module(count_untyped)

# "path name": why its JSON is free-form.
FREE_FORM: dict[str, str] = {
    "app/services/session_items.py SessionItemService.add": "OpenAI Responses input items as "
    "the caller wrote them (a reasoning item is echoed back with its fields in their order)",
    "app/services/session_config.py agent_of": "the stored agent row, read field by field with "
    "a type check each (a row another version or a hand edit wrote is a 409, never a 500)",
    "app/services/tool_schemas.py unresolvable_reference": "a tool's input_schema: the JSON "
    "Schema of its arguments, any schema the caller wrote",
    "app/services/turns/tools.py _schema_error": "a tool's input_schema, which the model's "
    "arguments are validated against: any JSON Schema the caller wrote",
    "app/services/turns/model_call.py call_model": "the provider request body as prepared "
    "(spec §2): the client encodes it for its provider",
    "app/services/sessions.py _with_profile": "the agent as stored on the session row: the "
    "caller's agent (its tools' schemas included) with its resolved profile",
    "app/services/sessions.py _profile_json": "the same stored agent, for a row written before "
    "agents chose a profile",
    "app/services/compaction/source.py _plan_of": "a turn row's stored plan in either of its "
    "two shapes, parsed with checks (a bad row is a runtime_state_error)",
    "app/services/world_state.py _ProvidedCache.inputs": "a session's workspace.provided value "
    "as the caller wrote it, compared with the cached one before it is parsed again",
    # A drop-in endpoint speaks the provider's own protocol: bodies in and out are its JSON.
    "app/services/proxy/contract.py Codec.decode": "a provider protocol's request body",
    "app/services/proxy/contract.py Codec.render": "a provider protocol's answer body",
    "app/services/proxy/contract.py Codec.render_error": "a provider protocol's error body",
}

# The functions outside FREE_FORM that still take or return ``dict[str, Any]``.
CEILING = 1


def _found() -> list[str]:
    return [f"{u.path} {u.name}" for u in count_untyped.untyped_service_functions()]


def test_the_untyped_service_signatures_only_fall() -> None:
    untyped = [f for f in _found() if f not in FREE_FORM]
    assert len(untyped) <= CEILING, (
        f"{len(untyped)} service functions take or return dict[str, Any] (ceiling {CEILING}); "
        "take a typed command and return a typed result instead:\n" + "\n".join(untyped)
    )


def test_every_free_form_place_still_exists() -> None:
    # A typed one leaves the list: the list says where free-form JSON is, not where it was.
    stale = sorted(set(FREE_FORM) - set(_found()))
    assert not stale, f"no longer untyped, remove from FREE_FORM: {stale}"


def test_the_counter_sees_nested_and_quoted_annotations(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import Any\n"
        "def a(x: list[dict[str, Any]]) -> None: ...\n"
        "def b() -> 'dict[str, Any]': ...\n"
        "class C:\n"
        "    async def c(self, *, m: Mapping[str, Any]) -> int: ...\n"
        "def typed(x: dict[str, int]) -> str: ...\n",
        encoding="utf-8",
    )
    root, count_untyped.ROOT = count_untyped.ROOT, tmp_path
    try:
        found = [u.name for u in count_untyped.untyped_in(source)]
    finally:
        count_untyped.ROOT = root
    assert found == ["a", "b", "C.c"]
