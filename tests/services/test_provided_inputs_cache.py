"""The sampler keeps each session's caller-provided inputs while the stored value stays equal: a
turn captures at every step, and a large provided layout is not checked and rendered again."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import InvalidInput
from app.services.world_state import _ProvidedCache


def provided(*layout: str, agents_md: str | None = "Be brief.") -> dict[str, Any]:
    return {"working_directory": "/shown", "layout": list(layout), "agents_md": agents_md}


def test_an_equal_value_reuses_the_inputs_and_a_changed_one_is_built_again() -> None:
    cache = _ProvidedCache()
    first = cache.inputs("ses-1", provided("src/", "README.md"))

    # Another object with the same content (the row loaded again at the next step).
    assert cache.inputs("ses-1", provided("src/", "README.md")) is first
    changed = cache.inputs("ses-1", provided("src/", "README.md", "docs/"))
    assert changed is not first
    assert changed.layout == ("src/", "README.md", "docs/")
    # Per session: another session's equal value is its own entry, built from its value.
    assert cache.inputs("ses-2", provided("lib/")).layout == ("lib/",)


def test_the_value_kept_is_a_copy_so_a_change_in_place_is_seen() -> None:
    cache = _ProvidedCache()
    value = provided("src/")
    cache.inputs("ses-1", value)

    value["layout"].append("tests/")

    assert cache.inputs("ses-1", value).layout == ("src/", "tests/")


def test_a_value_its_rules_refuse_raises_every_time_and_is_not_kept() -> None:
    cache = _ProvidedCache()
    cache.inputs("ses-1", provided("src/"))
    too_long = provided("src/", agents_md="x" * (64 * 1024 + 1))

    for _ in range(2):
        with pytest.raises(InvalidInput) as refused:
            cache.inputs("ses-1", too_long)
        assert refused.value.code == "project_instruction_error"


def test_the_bound_is_the_values_json_bytes() -> None:
    value = provided("src/")
    size = len(b'{"working_directory":"/shown","layout":["src/"],"agents_md":"Be brief."}')
    at_the_bound = _ProvidedCache(max_bytes=size)
    kept = at_the_bound.inputs("ses-1", value)
    assert at_the_bound.inputs("ses-1", value) is kept

    one_under = _ProvidedCache(max_bytes=size - 1)
    built = one_under.inputs("ses-1", value)
    assert one_under.inputs("ses-1", value) is not built  # not kept: built again
