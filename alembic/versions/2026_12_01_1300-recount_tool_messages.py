"""Forget the exact counters' stored figures of tool messages (they now count the state line).

The exact counters count the text the encodings add to a tool result for the model (a
non-success result's state line, the ``[no output]`` of an empty one; spec §9,
``app.core.tool_state``). ``token_counts`` is a cache of figures derived from immutable content; a missing figure is
measured again by the next read of the conversation (``app.services.tokens.load_counted``) and
stored. Figures stored before this revision would undercount non-success and empty results, so
every tool message's figures are dropped (successful ones come back equal). The estimate's
``content_bytes`` measures the prepared JSON and is unchanged. Nothing to undo on downgrade: the
older code measures the figures it misses the same way.

Revision ID: 2026_12_01_1300
Revises: 2026_12_01_1030
Create Date: 2026-12-01 13:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "2026_12_01_1300"
down_revision: str | None = "2026_12_01_1030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("UPDATE messages SET token_counts = '{}' WHERE role = 'tool'")


def downgrade() -> None:
    pass
