"""What a reader of this repository is pointed at exists in this repository.

``docs/spec.md`` is the project's specification. No document, comment, docstring, served OpenAPI
text or line ``ctxsvc migrate`` prints may send a reader to a document that does not ship (the
design notes the service was first built from, an issue tracker), and every ``spec §N.M``
citation must name a section ``docs/spec.md`` has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from app.cli import describe_migration, openapi_document
from app.storage.migrate import AppliedMigration, MigrationReport, alembic_config

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec.md"
TEXT_SUFFIXES = {".md", ".py", ".html", ".jinja", ".j2", ".js", ".css", ".txt", ".ini", ".mako"}

# Names of documents outside the repository, each with what to write instead.
OUTSIDE = {
    r"\bSPEC\.md\b": "cite docs/spec.md as `spec §N.M`",
    r"\bAPI\.md\b": "cite the HTTP contract as `spec §11`–`§20`",
    r"(?<![\w/-])seeds/": "the seeds are not in the repository: cite docs/spec.md",
    r"(?<![\w/-])reference/": "the reference notes are not in the repository: cite docs/spec.md",
    r"\b[Ii]ssues?\s+#?\d+": "say what the tracker item asked for, or link a docs/ section",
    r"\bSPEC\b": "write `spec §N.M` (docs/spec.md)",
    r"\b(?:reference|acceptance)\s+§": "the design notes do not ship: cite `spec §N.M`",
}

# `spec §2.1`, and the sections that follow it in a list: `spec §5, §6, §7`, `spec §2.1–§2.3`.
CITATION = re.compile(
    r"(?i)\bspec(?:\s+|\\n)§\s*(\d+(?:\.\d+)?)((?:\s*(?:,|–|-|and|or|/)\s*§\s*\d+(?:\.\d+)?)*)"
)
FOLLOWING = re.compile(r"§\s*(\d+(?:\.\d+)?)")


def spec_sections() -> set[str]:
    """The section numbers docs/spec.md has: `## N.` and `### N.M` headings."""
    found: set[str] = set()
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{2,3} (\d+(?:\.\d+)?)\.? ", line)
        if heading:
            found.add(heading.group(1))
    return found


def repository_texts() -> Iterator[tuple[str, str]]:
    """(where, text) for every file a reader of the repository reads as documentation."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*"))]:
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    # The tests, benches, client and scripts are read by whoever changes them: they cite the same.
    for folder in ("app", "alembic", "tests", "bench", "clients", "scripts"):
        for path in sorted((ROOT / folder).rglob("*")):
            if (
                path.is_file()
                and path.suffix in TEXT_SUFFIXES
                and not {"__pycache__", ".venv", "node_modules"} & set(path.parts)
                and path != Path(__file__).resolve()
            ):
                yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


def served_texts() -> Iterator[tuple[str, str]]:
    """The OpenAPI description the app serves, and the lines a fresh `ctxsvc migrate` prints."""
    yield (
        "the served OpenAPI description",
        json.dumps(json.loads(openapi_document()), ensure_ascii=False),
    )
    yield (
        "the committed openapi/openapi.json",
        (ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"),
    )
    yield "the lines `ctxsvc migrate` prints", "\n".join(migration_lines())


def migration_lines() -> list[str]:
    """What `ctxsvc migrate` prints for an empty database (every migration, oldest first)."""
    script = ScriptDirectory.from_config(alembic_config())
    (head,) = script.get_heads()
    applied = tuple(
        AppliedMigration(r.revision, r.doc)
        for r in reversed(list(script.iterate_revisions(head, "base")))
    )
    report = MigrationReport(frozenset(), frozenset({head}), applied)
    return describe_migration("sqlite+aiosqlite:///./data/ctxsvc.db", report)


def all_texts() -> list[tuple[str, str]]:
    return [*repository_texts(), *served_texts()]


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


@pytest.mark.parametrize("pattern", sorted(OUTSIDE))
def test_nothing_names_a_document_outside_the_repository(pattern: str) -> None:
    found = [
        f"{where}:{line_of(text, match.start())}: {match.group(0)!r}"
        for where, text in all_texts()
        for match in re.finditer(pattern, text)
    ]
    assert not found, f"{OUTSIDE[pattern]}:\n" + "\n".join(found)


def test_every_spec_citation_names_a_section_of_docs_spec() -> None:
    sections = spec_sections()
    cited = 0
    wrong: list[str] = []
    for where, text in all_texts():
        for match in CITATION.finditer(text):
            numbers = [match.group(1), *FOLLOWING.findall(match.group(2))]
            cited += len(numbers)
            wrong.extend(
                f"{where}:{line_of(text, match.start())}: §{n}"
                for n in numbers
                if n not in sections
            )
    assert not wrong, "cited sections docs/spec.md does not have:\n" + "\n".join(wrong)
    assert cited > 100  # the citations are found (the pattern did not silently stop matching)


def test_spec_keeps_the_numbering_of_its_behaviour_and_contract_parts() -> None:
    sections = spec_sections()
    assert {str(n) for n in range(20)} <= sections
    behaviour = {"2.1", "2.2", "2.3", "2.4", "3.1", "3.2", "3.3", "3.4"}
    compaction = {f"7.{n}" for n in range(1, 9)}
    assert behaviour | compaction <= sections


def test_the_configuration_doc_shows_what_migrate_prints() -> None:
    """docs/configuration.md's example is the output of `ctxsvc migrate` on an empty database."""
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    expected = "\n".join(f"ctxsvc: {line}" for line in migration_lines())
    assert expected in doc, (
        "docs/configuration.md's migrate example is stale: run `ctxsvc migrate` against an empty "
        "database (CTXSVC_DATABASE_URL=sqlite:///./data/ctxsvc.db) and paste what it prints"
    )
