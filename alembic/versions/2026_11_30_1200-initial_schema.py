"""Initial schema: every table the service needs (spec §5, §6, §7).

Reviewed, not raw autogenerate output: plain DateTime(timezone=True) instead of the app's
UTCDateTime decorator (a migration must not change when app code does), and partial unique
indexes declared for both dialects.

Revision ID: 2026_11_30_1200
Revises:
Create Date: 2026-11-30 03:07:10.358342+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_11_30_1200"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calibration_samples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("model_id", sa.Text(), nullable=False),
        sa.Column("counter", sa.String(length=64), nullable=False),
        sa.Column("estimated_input_tokens", sa.Integer(), nullable=False),
        sa.Column("reported_input_tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibration_samples")),
    )
    op.create_index(
        "ix_calibration_samples_model_counter",
        "calibration_samples",
        ["model_id", "counter", "id"],
        unique=False,
    )

    op.create_table(
        "models",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("context_window_tokens", sa.Integer(), nullable=False),
        sa.Column("max_output_tokens", sa.Integer(), nullable=False),
        sa.Column("max_reasoning_tokens", sa.Integer(), nullable=True),
        sa.Column("accepts_data_blocks", sa.Boolean(), nullable=False),
        sa.Column("fixed_reserve_tokens", sa.Integer(), nullable=False),
        sa.Column("safety_margin_tokens", sa.Integer(), nullable=False),
        sa.Column("token_counter", sa.String(length=64), nullable=False),
        sa.Column("provider_kind", sa.String(length=32), nullable=False),
        sa.Column("provider_base_url", sa.Text(), nullable=True),
        sa.Column("provider_model_name", sa.Text(), nullable=True),
        sa.Column("provider_api_key_env", sa.Text(), nullable=True),
        sa.Column("script", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("script_position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "provider_kind IN ('openai_chat', 'anthropic_messages', 'scripted', 'local')",
            name=op.f("ck_models_provider_kind_valid"),
        ),
        sa.CheckConstraint("length(trim(id)) > 0", name=op.f("ck_models_id_not_blank")),
        sa.CheckConstraint(
            "script_position >= 0", name=op.f("ck_models_script_position_not_negative")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("model_id", sa.Text(), nullable=False),
        sa.Column("summary_model_id", sa.Text(), nullable=False),
        sa.Column("agent", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("workspace", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("sandbox", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("disabled_skills", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("tool_result_pruned_through_sequence", sa.BigInteger(), nullable=True),
        sa.Column("last_message_sequence", sa.BigInteger(), nullable=False),
        sa.Column("last_event_sequence", sa.BigInteger(), nullable=False),
        sa.Column("reload_required", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "last_event_sequence >= 0", name=op.f("ck_sessions_last_event_sequence_valid")
        ),
        sa.CheckConstraint(
            "last_message_sequence >= 0", name=op.f("ck_sessions_last_message_sequence_valid")
        ),
        sa.CheckConstraint("length(trim(id)) > 0", name=op.f("ck_sessions_id_not_blank")),
        sa.CheckConstraint(
            "tool_result_pruned_through_sequence IS NULL "
            "OR tool_result_pruned_through_sequence > 0",
            name=op.f("ck_sessions_pruned_through_positive"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_index("ix_sessions_created_at_id", "sessions", ["created_at", "id"], unique=False)

    op.create_table(
        "agent_messages",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("agent_message_id", sa.Text(), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_message_sequence", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('final_answer', 'interrupted', 'failed')",
            name=op.f("ck_agent_messages_kind_valid"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_agent_messages_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "agent_message_id", name=op.f("pk_agent_messages")),
    )
    op.create_index(
        "ix_agent_messages_session_id_created_at",
        "agent_messages",
        ["session_id", "created_at"],
        unique=False,
    )

    op.create_table(
        "conversation_compactions",
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
        sa.Column("runtime_state", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("runtime_reminder", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("trigger_turn_id", sa.Text(), nullable=True),
        sa.Column("parent_compaction_id", sa.Text(), nullable=True),
        sa.Column("trigger", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("prepare_ms", sa.Integer(), nullable=True),
        sa.Column("summary_ms", sa.Integer(), nullable=True),
        sa.Column("persistence_ms", sa.Integer(), nullable=True),
        sa.Column("install_ms", sa.Integer(), nullable=True),
        sa.Column("conversation_tokens_before", sa.Integer(), nullable=True),
        sa.Column("conversation_tokens_after", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(kind = 'rewind') = (parent_compaction_id IS NOT NULL)",
            name=op.f("ck_conversation_compactions_parent_iff_rewind"),
        ),
        sa.CheckConstraint(
            "(kind IN ('threshold', 'overflow')) = (trigger_turn_id IS NOT NULL)",
            name=op.f("ck_conversation_compactions_trigger_turn_iff_in_turn"),
        ),
        sa.CheckConstraint(
            "kind = 'rewind' OR replaced_through_message_sequence = through_message_sequence",
            name=op.f("ck_conversation_compactions_only_rewind_hides_tail"),
        ),
        sa.CheckConstraint(
            "kind IN ('manual', 'threshold', 'overflow', 'rewind')",
            name=op.f("ck_conversation_compactions_kind_valid"),
        ),
        sa.CheckConstraint(
            "(last_user_message_id IS NULL) = (last_user_message_sequence IS NULL)",
            name=op.f("ck_conversation_compactions_last_user_both_or_neither"),
        ),
        sa.CheckConstraint(
            "attempts >= 0", name=op.f("ck_conversation_compactions_attempts_not_negative")
        ),
        sa.CheckConstraint(
            "last_user_message_sequence IS NULL "
            "OR last_user_message_sequence <= through_message_sequence",
            name=op.f("ck_conversation_compactions_last_user_within_facts"),
        ),
        sa.CheckConstraint(
            "length(summary) >= 500", name=op.f("ck_conversation_compactions_summary_min_length")
        ),
        sa.CheckConstraint(
            "replaced_through_message_sequence >= through_message_sequence",
            name=op.f("ck_conversation_compactions_replaced_covers_through"),
        ),
        sa.CheckConstraint(
            "sequence > 0", name=op.f("ck_conversation_compactions_sequence_positive")
        ),
        sa.CheckConstraint(
            "source_message_count >= 0",
            name=op.f("ck_conversation_compactions_source_count_not_negative"),
        ),
        sa.CheckConstraint(
            "summary_format_version = 1",
            name=op.f("ck_conversation_compactions_summary_format_version_1"),
        ),
        sa.CheckConstraint(
            "through_message_sequence >= 0 AND replaced_through_message_sequence >= 0",
            name=op.f("ck_conversation_compactions_boundaries_not_negative"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "parent_compaction_id"],
            ["conversation_compactions.session_id", "conversation_compactions.compaction_id"],
            name=op.f("fk_conversation_compactions_parent"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_conversation_compactions_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "session_id", "compaction_id", name=op.f("pk_conversation_compactions")
        ),
        sa.UniqueConstraint(
            "session_id", "sequence", name=op.f("uq_conversation_compactions_session_id_sequence")
        ),
    )
    op.create_table(
        "messages",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("content", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=True),
        sa.Column("turn_id", sa.Text(), nullable=True),
        sa.Column("world_state_section", sa.Text(), nullable=True),
        sa.Column("content_bytes", sa.Integer(), nullable=False),
        sa.Column("token_counts", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(role = 'tool') = (tool_call_id IS NOT NULL AND tool_name IS NOT NULL)",
            name=op.f("ck_messages_tool_identity"),
        ),
        sa.CheckConstraint(
            "kind = 'normal' OR role = 'user'", name=op.f("ck_messages_contextual_is_user")
        ),
        sa.CheckConstraint(
            "kind IN ('normal', 'skill_instruction', 'agent_message', 'world_state')",
            name=op.f("ck_messages_kind_valid"),
        ),
        sa.CheckConstraint(
            "role IN ('user', 'assistant', 'tool')", name=op.f("ck_messages_role_valid")
        ),
        sa.CheckConstraint(
            "content_bytes >= 0", name=op.f("ck_messages_content_bytes_not_negative")
        ),
        sa.CheckConstraint("sequence > 0", name=op.f("ck_messages_sequence_positive")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_messages_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "sequence", name=op.f("pk_messages")),
        sa.UniqueConstraint(
            "session_id", "message_id", name=op.f("uq_messages_session_id_message_id")
        ),
    )
    op.create_table(
        "session_events",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("sequence > 0", name=op.f("ck_session_events_sequence_positive")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_events_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "sequence", name=op.f("pk_session_events")),
    )
    op.create_table(
        "turns",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("client_request_id", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=False),
        sa.Column("input", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("outcome", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("model_call_index", sa.Integer(), nullable=False),
        sa.Column("pending_tool_calls", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("plan", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("reasoning_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'running') = (finished_at IS NULL)",
            name=op.f("ck_turns_finished_iff_terminal"),
        ),
        sa.CheckConstraint(
            "status IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')",
            name=op.f("ck_turns_status_valid"),
        ),
        sa.CheckConstraint(
            "length(trim(client_request_id)) > 0", name=op.f("ck_turns_client_request_id_not_blank")
        ),
        sa.CheckConstraint(
            "model_call_index >= 0", name=op.f("ck_turns_model_call_index_not_negative")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_turns_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "turn_id", name=op.f("pk_turns")),
        sa.UniqueConstraint(
            "session_id", "client_request_id", name=op.f("uq_turns_session_id_client_request_id")
        ),
    )
    op.create_index(
        "ix_turns_session_id_created_at", "turns", ["session_id", "created_at"], unique=False
    )
    op.create_index(
        "ix_turns_status_lease_expires_at", "turns", ["status", "lease_expires_at"], unique=False
    )
    op.create_index(
        "uq_turns_one_running_per_session",
        "turns",
        ["session_id"],
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )

    op.create_table(
        "world_state_baselines",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("section_id", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_world_state_baselines_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "section_id", name=op.f("pk_world_state_baselines")),
    )
    op.create_table(
        "tool_calls",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("message_sequence", sa.BigInteger(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("result_sequence", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("call_index >= 0", name=op.f("ck_tool_calls_call_index_not_negative")),
        sa.CheckConstraint(
            "result_sequence IS NULL OR result_sequence > message_sequence",
            name=op.f("ck_tool_calls_result_after_call"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "message_sequence"],
            ["messages.session_id", "messages.sequence"],
            name=op.f("fk_tool_calls_session_id_message_sequence_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "session_id", "message_sequence", "call_index", name=op.f("pk_tool_calls")
        ),
    )
    op.create_index(
        "uq_tool_calls_unresolved_call_id",
        "tool_calls",
        ["session_id", "call_id"],
        unique=True,
        sqlite_where=sa.text("result_sequence IS NULL"),
        postgresql_where=sa.text("result_sequence IS NULL"),
    )

    op.create_table(
        "turn_plans",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("plan", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id", "turn_id"],
            ["turns.session_id", "turns.turn_id"],
            name=op.f("fk_turn_plans_session_id_turn_id_turns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "turn_id", name=op.f("pk_turn_plans")),
    )


def downgrade() -> None:
    op.drop_table("turn_plans")
    op.drop_index(
        "uq_tool_calls_unresolved_call_id",
        table_name="tool_calls",
        sqlite_where=sa.text("result_sequence IS NULL"),
        postgresql_where=sa.text("result_sequence IS NULL"),
    )
    op.drop_table("tool_calls")
    op.drop_table("world_state_baselines")
    op.drop_index(
        "uq_turns_one_running_per_session",
        table_name="turns",
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    op.drop_index("ix_turns_status_lease_expires_at", table_name="turns")
    op.drop_index("ix_turns_session_id_created_at", table_name="turns")
    op.drop_table("turns")
    op.drop_table("session_events")
    op.drop_table("messages")
    op.drop_table("conversation_compactions")
    op.drop_index("ix_agent_messages_session_id_created_at", table_name="agent_messages")
    op.drop_table("agent_messages")
    op.drop_index("ix_sessions_created_at_id", table_name="sessions")
    op.drop_table("sessions")
    op.drop_table("models")
    op.drop_index("ix_calibration_samples_model_counter", table_name="calibration_samples")
    op.drop_table("calibration_samples")
