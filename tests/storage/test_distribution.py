"""The migrated PostgreSQL schema can be distributed by session (spec §5, Citus).

Citus shards a table by one column and co-locates tables sharded alike; it requires that every
primary key and unique constraint (unique indexes included) of a distributed table contain the
distribution column, that a foreign key between two distributed tables join them on it (so it
never crosses shards), that no reference (global) table point at a distributed one, and that no
``SET NULL`` / ``SET DEFAULT`` action clear it. ``docs/deploy.md`` gives the statements; this
test reads the catalogue of the schema ``alembic upgrade head`` builds, so a migration that
breaks the rule fails here, whichever table it adds.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest

from tests.conftest import admin_conninfo

pytestmark = pytest.mark.postgres

# The session row itself: its id is what every other session-scoped table calls session_id.
SESSIONS = "sessions"
SESSION_COLUMN = "session_id"
# Tables without sessions: replicated (reference) or kept on the coordinator (docs/deploy.md).
GLOBAL_TABLES = {"models", "calibration_samples", "api_keys", "alembic_version"}


@dataclass(frozen=True)
class Constraint:
    table: str
    name: str
    kind: str  # p primary key, u unique, f foreign key, i unique index
    columns: tuple[str, ...]
    referenced_table: str | None = None
    referenced_columns: tuple[str, ...] = ()
    delete_action: str = "a"
    update_action: str = "a"
    delete_set_columns: tuple[str, ...] | None = None


def distribution_column(table: str) -> str:
    return "id" if table == SESSIONS else SESSION_COLUMN


@pytest.fixture(scope="module")
def catalogue(postgres_url: str) -> tuple[dict[str, set[str]], list[Constraint]]:
    with psycopg.connect(admin_conninfo(postgres_url)) as connection:
        columns: dict[str, set[str]] = {}
        for table, column in connection.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        ):
            columns.setdefault(table, set()).add(column)
        constraints = [
            Constraint(table, name, kind, tuple(cols), ref, tuple(ref_cols or ()), d, u, dset)
            for table, name, kind, cols, ref, ref_cols, d, u, dset in connection.execute(
                """
                SELECT c.conrelid::regclass::text, c.conname, c.contype,
                       ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
                             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n
                             ORDER BY k.i),
                       c.confrelid::regclass::text,
                       ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
                             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n
                             ORDER BY k.i),
                       c.confdeltype, c.confupdtype,
                       ARRAY(SELECT a.attname FROM unnest(c.confdelsetcols) k(n)
                             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n)
                FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
                WHERE n.nspname = 'public' AND c.contype IN ('p', 'u', 'f')
                """
            )
        ]
        constraints += [
            Constraint(table, name, "i", tuple(cols))
            for table, name, cols in connection.execute(
                """
                SELECT t.relname, i.relname,
                       ARRAY(SELECT a.attname FROM unnest(x.indkey) k(n)
                             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n)
                FROM pg_index x
                JOIN pg_class i ON i.oid = x.indexrelid
                JOIN pg_class t ON t.oid = x.indrelid
                JOIN pg_namespace n ON n.oid = t.relnamespace
                WHERE n.nspname = 'public' AND x.indisunique
                """
            )
        ]
    return columns, constraints


def session_scoped(columns: dict[str, set[str]]) -> set[str]:
    return {t for t, cols in columns.items() if SESSION_COLUMN in cols} | {SESSIONS}


def test_every_table_is_session_scoped_or_known_to_be_global(
    catalogue: tuple[dict[str, set[str]], list[Constraint]],
) -> None:
    columns, _ = catalogue
    unknown = set(columns) - session_scoped(columns) - GLOBAL_TABLES
    assert not unknown, f"tables without {SESSION_COLUMN} that docs/deploy.md does not place"
    assert {"messages", "turns", "session_events", "tool_calls"} <= session_scoped(columns)


def test_every_key_and_unique_index_of_a_session_table_holds_the_session(
    catalogue: tuple[dict[str, set[str]], list[Constraint]],
) -> None:
    columns, constraints = catalogue
    scoped = session_scoped(columns)
    keys = [c for c in constraints if c.kind in ("p", "u", "i") and c.table in scoped]
    assert keys
    missing = [c.name for c in keys if distribution_column(c.table) not in c.columns]
    assert not missing, f"keys or unique indexes without the session: {missing}"


def test_no_foreign_key_joins_two_sessions(
    catalogue: tuple[dict[str, set[str]], list[Constraint]],
) -> None:
    columns, constraints = catalogue
    scoped = session_scoped(columns)
    foreign = [c for c in constraints if c.kind == "f"]
    assert foreign
    for fk in foreign:
        if fk.table in scoped and fk.referenced_table in scoped:
            assert fk.referenced_table is not None
            pairs = set(zip(fk.columns, fk.referenced_columns, strict=True))
            same = (distribution_column(fk.table), distribution_column(fk.referenced_table))
            assert same in pairs, f"{fk.name} does not join on the session: {sorted(pairs)}"
        elif fk.table not in scoped:
            # A global (reference) table cannot point at a distributed one.
            assert fk.referenced_table not in scoped, f"{fk.name}: global → session table"


def test_no_foreign_key_action_clears_the_session(
    catalogue: tuple[dict[str, set[str]], list[Constraint]],
) -> None:
    columns, constraints = catalogue
    scoped = session_scoped(columns)
    for fk in constraints:
        if fk.kind != "f" or fk.table not in scoped:
            continue
        session = distribution_column(fk.table)
        if session not in fk.columns:
            continue
        assert fk.update_action not in ("n", "d"), f"{fk.name}: ON UPDATE SET NULL/DEFAULT"
        if fk.delete_action in ("n", "d"):
            cleared = fk.delete_set_columns or fk.columns  # no list: every column of the key
            assert session not in cleared, f"{fk.name}: ON DELETE clears {session}"
