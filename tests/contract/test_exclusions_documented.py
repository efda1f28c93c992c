"""What the contract run lets through is documented: every code the replaced check accepts is in
the table of ``docs/api-notes.md`` ("What the schema cannot state"), with its reason, and is one
of the 422 codes its operation documents."""

from __future__ import annotations

import json
import re

from tests.contract.hooks import UNSTATABLE
from tests.servers import REPO_ROOT


def documented_unstatable() -> set[str]:
    notes = (REPO_ROOT / "docs" / "api-notes.md").read_text(encoding="utf-8")
    section = notes.split("## What the schema cannot state", 1)[1].split("\n## ", 1)[0]
    codes: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            codes.update(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return codes


def test_the_accepted_refusals_are_the_documented_ones() -> None:
    assert set().union(*UNSTATABLE.values()) == documented_unstatable()


def test_each_accepted_refusal_is_a_documented_422_of_its_operation() -> None:
    spec = json.loads((REPO_ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"))
    for label, codes in UNSTATABLE.items():
        method, path = label.split(" ", 1)
        responses = spec["paths"][path][method.lower()]["responses"]
        enum = responses["422"]["content"]["application/problem+json"]["schema"]["properties"]
        assert codes <= set(enum["code"]["enum"]), label
