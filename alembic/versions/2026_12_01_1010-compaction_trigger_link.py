"""A compaction's ``trigger_turn_id`` names a turn of its session, or nothing.

A session prepare (``POST /v1/sessions/{id}/prepare``) that reached the trigger line compacted
with its request id (``prepare-<uuid32>``) in ``trigger_turn_id``, though no turn has that id.
That id moves to a column of its own, ``trigger_prepare_id``, and a foreign key makes
``trigger_turn_id`` a real link to ``turns``. A threshold or overflow checkpoint names exactly one
of the two. The live updates such a prepare wrote (``compaction_started``/``_finished``) carried
the id in ``session_events.turn_id``; they now carry no turn and name the prepare in their
payload (``prepare_id``), as new ones do.

Rows to move: every ``trigger_turn_id`` (and event ``turn_id``) that matches no turn of its
session. Session prepare was the only writer of such ids.

On SQLite the CHECK and FOREIGN KEY changes need a new table. Alembic's batch mode cannot be used:
with ``foreign_keys=ON`` (the service's engine sets it, and it cannot be changed inside the
migration's transaction) dropping the old table deletes its rows first, which cascades to every
row of the copy whose ``parent_compaction_id`` points at them (batch mode keeps self-references
on the old name). Here the copy's self-reference names the copy itself; ``ALTER TABLE ... RENAME``
then rewrites it to the final name (SQLite ≥ 3.26), and dropping the old table cascades nowhere.

Revision ID: 2026_12_01_1010
Revises: 2026_12_01_1000
Create Date: 2026-12-01 10:10:00+00:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_01_1010"
down_revision: str | None = "2026_12_01_1000"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLE = "conversation_compactions"
_COPY = "_new_conversation_compactions"
_OLD_CHECK = "ck_conversation_compactions_trigger_turn_iff_in_turn"
_OLD_CHECK_SQL = "(kind IN ('threshold', 'overflow')) = (trigger_turn_id IS NOT NULL)"
_CHECKS = {
    "ck_conversation_compactions_trigger_iff_in_turn": (
        "(kind IN ('threshold', 'overflow')) = "
        "(trigger_turn_id IS NOT NULL OR trigger_prepare_id IS NOT NULL)"
    ),
    "ck_conversation_compactions_one_trigger": (
        "trigger_turn_id IS NULL OR trigger_prepare_id IS NULL"
    ),
}
_FK = "fk_conversation_compactions_trigger_turn"

_IS_A_TURN = (
    "EXISTS (SELECT 1 FROM turns WHERE turns.session_id = {t}.session_id "
    "AND turns.turn_id = {t}.trigger_turn_id)"
)
_EVENT_IS_A_TURN = (
    "EXISTS (SELECT 1 FROM turns WHERE turns.session_id = session_events.session_id "
    "AND turns.turn_id = session_events.turn_id)"
)

# Every column at this revision but the new one, in table order.
_COLUMNS = (
    "session_id, compaction_id, sequence, kind, through_message_sequence, "
    "replaced_through_message_sequence, source_message_count, last_user_message_id, "
    "last_user_message_sequence, summary, summary_format_version, runtime_state, "
    "runtime_reminder, model, input_tokens, output_tokens, trigger_turn_id, "
    'parent_compaction_id, "trigger", attempts, prepare_ms, summary_ms, persistence_ms, '
    "install_ms, conversation_tokens_before, conversation_tokens_after, created_at"
)


def _compactions(name: str, *, linked: bool) -> sa.Table:
    """The table at this revision (``linked``) or the one before, under ``name``; constraint
    names are the final ones, whatever ``name`` is."""
    json_type = sa.JSON(none_as_null=True)
    columns = [
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("compaction_id", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("through_message_sequence", sa.BigInteger(), nullable=False),
        sa.Column("replaced_through_message_sequence", sa.BigInteger(), nullable=False),
        sa.Column("source_message_count", sa.Integer(), nullable=False),
        sa.Column("last_user_message_id", sa.Text(), nullable=True),
        sa.Column("last_user_message_sequence", sa.BigInteger(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("summary_format_version", sa.Integer(), nullable=False),
        sa.Column("runtime_state", json_type, nullable=False),
        sa.Column("runtime_reminder", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("trigger_turn_id", sa.Text(), nullable=True),
        sa.Column("parent_compaction_id", sa.Text(), nullable=True),
        sa.Column("trigger", json_type, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("prepare_ms", sa.Integer(), nullable=True),
        sa.Column("summary_ms", sa.Integer(), nullable=True),
        sa.Column("persistence_ms", sa.Integer(), nullable=True),
        sa.Column("install_ms", sa.Integer(), nullable=True),
        sa.Column("conversation_tokens_before", sa.Integer(), nullable=True),
        sa.Column("conversation_tokens_after", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    ]
    checks = {
        "parent_iff_rewind": "(kind = 'rewind') = (parent_compaction_id IS NOT NULL)",
        "only_rewind_hides_tail": (
            "kind = 'rewind' OR replaced_through_message_sequence = through_message_sequence"
        ),
        "kind_valid": "kind IN ('manual', 'threshold', 'overflow', 'rewind')",
        "last_user_both_or_neither": (
            "(last_user_message_id IS NULL) = (last_user_message_sequence IS NULL)"
        ),
        "attempts_not_negative": "attempts >= 0",
        "last_user_within_facts": (
            "last_user_message_sequence IS NULL "
            "OR last_user_message_sequence <= through_message_sequence"
        ),
        "summary_min_length": "length(summary) >= 500",
        "replaced_covers_through": "replaced_through_message_sequence >= through_message_sequence",
        "sequence_positive": "sequence > 0",
        "source_count_not_negative": "source_message_count >= 0",
        "summary_format_version_1": "summary_format_version = 1",
        "boundaries_not_negative": (
            "through_message_sequence >= 0 AND replaced_through_message_sequence >= 0"
        ),
    }
    constraints: list[Any] = [
        sa.CheckConstraint(sql, name=f"ck_{_TABLE}_{short}") for short, sql in checks.items()
    ]
    if linked:
        columns.append(sa.Column("trigger_prepare_id", sa.Text(), nullable=True))
        constraints += [sa.CheckConstraint(sql, name=n) for n, sql in _CHECKS.items()]
        constraints.append(
            sa.ForeignKeyConstraint(
                ["session_id", "trigger_turn_id"], ["turns.session_id", "turns.turn_id"], name=_FK
            )
        )
    else:
        constraints.append(sa.CheckConstraint(_OLD_CHECK_SQL, name=_OLD_CHECK))
    constraints += [
        sa.ForeignKeyConstraint(
            ["session_id", "parent_compaction_id"],
            [f"{name}.session_id", f"{name}.compaction_id"],
            name="fk_conversation_compactions_parent",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_conversation_compactions_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "compaction_id", name="pk_conversation_compactions"),
        sa.UniqueConstraint(
            "session_id", "sequence", name="uq_conversation_compactions_session_id_sequence"
        ),
    ]
    metadata = sa.MetaData()
    sa.Table("turns", metadata, sa.Column("session_id", sa.Text()), sa.Column("turn_id", sa.Text()))
    sa.Table("sessions", metadata, sa.Column("id", sa.Text()))
    return sa.Table(name, metadata, *columns, *constraints)


def _rebuild_on_sqlite(*, linked: bool, select: str) -> None:
    """Copy ``conversation_compactions`` into the table of ``linked``'s revision (``select``
    gives its columns from the old table ``c``) and put the copy in its place."""
    bind = op.get_bind()
    _compactions(_COPY, linked=linked).create(bind)
    target = _COLUMNS + (", trigger_prepare_id" if linked else "")
    op.execute(f"INSERT INTO {_COPY} ({target}) SELECT {select} FROM {_TABLE} AS c")
    op.execute(f"DROP TABLE {_TABLE}")
    op.execute(f"ALTER TABLE {_COPY} RENAME TO {_TABLE}")


def _old_columns_with(trigger_turn: str, extra: str = "") -> str:
    columns = [f"c.{name.strip()}" for name in _COLUMNS.split(",")]
    columns[columns.index("c.trigger_turn_id")] = trigger_turn
    return ", ".join(columns) + extra


def _events(*, to_payload: bool) -> None:
    """Upgrade: an event ``turn_id`` that is no turn moves into the payload (``prepare_id``).
    Downgrade: back."""
    bind = op.get_bind()
    events = sa.table(
        "session_events",
        sa.column("session_id"),
        sa.column("sequence"),
        sa.column("type"),
        sa.column("turn_id"),
        sa.column("payload", sa.JSON()),
    )
    if to_payload:
        found = sa.select(events).where(
            events.c.turn_id.is_not(None), sa.text(f"NOT {_EVENT_IS_A_TURN}")
        )
    else:
        types = ("compaction_started", "compaction_finished")
        found = sa.select(events).where(events.c.turn_id.is_(None), events.c.type.in_(types))
    for row in bind.execute(found).all():
        payload = row.payload if isinstance(row.payload, dict) else json.loads(row.payload)
        if to_payload:
            payload = {**payload, "prepare_id": row.turn_id}
            turn_id = None
        elif "prepare_id" in payload:
            turn_id = payload.pop("prepare_id")
        else:
            continue
        bind.execute(
            sa.update(events)
            .where(events.c.session_id == row.session_id, events.c.sequence == row.sequence)
            .values(turn_id=turn_id, payload=payload)
        )


def upgrade() -> None:
    is_a_turn = _IS_A_TURN.format(t="c")
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_on_sqlite(
            linked=True,
            select=_old_columns_with(
                f"CASE WHEN {is_a_turn} THEN c.trigger_turn_id END",
                f", CASE WHEN NOT {is_a_turn} THEN c.trigger_turn_id END",
            ),
        )
    else:
        op.add_column(_TABLE, sa.Column("trigger_prepare_id", sa.Text(), nullable=True))
        op.drop_constraint(op.f(_OLD_CHECK), _TABLE, type_="check")
        op.execute(
            f"UPDATE {_TABLE} AS c SET trigger_prepare_id = trigger_turn_id, "
            f"trigger_turn_id = NULL WHERE trigger_turn_id IS NOT NULL AND NOT {is_a_turn}"
        )
        for name, sql in _CHECKS.items():
            op.create_check_constraint(op.f(name), _TABLE, sql)
        op.create_foreign_key(
            op.f(_FK),
            _TABLE,
            "turns",
            ["session_id", "trigger_turn_id"],
            ["session_id", "turn_id"],
        )
    _events(to_payload=True)


def downgrade() -> None:
    _events(to_payload=False)
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_on_sqlite(
            linked=False,
            select=_old_columns_with("coalesce(c.trigger_turn_id, c.trigger_prepare_id)"),
        )
        return
    op.drop_constraint(op.f(_FK), _TABLE, type_="foreignkey")
    for name in _CHECKS:
        op.drop_constraint(op.f(name), _TABLE, type_="check")
    op.execute(
        f"UPDATE {_TABLE} SET trigger_turn_id = trigger_prepare_id "
        "WHERE trigger_prepare_id IS NOT NULL"
    )
    op.create_check_constraint(op.f(_OLD_CHECK), _TABLE, _OLD_CHECK_SQL)
    op.drop_column(_TABLE, "trigger_prepare_id")
