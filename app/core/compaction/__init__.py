"""Compaction rules of spec §7, pure: summary request and validation, retry decisions, runtime
state and reminder, checkpoint projection, rewind, replay, transcript read-back, the rule that
a compaction must shrink the conversation (``shrink``), what a caller's summary must keep of the
user's facts (``user_facts``), and the offline ``local`` summarizer. The compaction service
composes them with storage and providers.

Errors (all ``ServiceError``, stable codes)::

    InvalidInput
    ├── SummaryInvalid            invalid_summary      a summary breaks §7.4 (class degenerate)
    ├── RuntimeStateError         compaction_error     unreadable stored state or plan
    ├── HistoryArgumentsInvalid   invalid_arguments    conversation_history tool arguments
    ├── (InvalidInput)            invalid_selector, invalid_after_sequence, invalid_limit,
    │                             invalid_compaction_id, invalid_rewind, invalid_retry_policy,
    │                             unknown_compaction_id (an id in a body or query),
    │                             summary_drops_user_facts (a caller's summary, ``user_facts``)
    Conflict                      missing_last_user    nothing to replay
    ├── CompactionNotSmaller      compaction_not_smaller  a summary would not shrink (manual:
    │                                                     unless allow_larger)
    NotFound                      compaction_not_found (an id in the path)
    TooLarge                      summary_input_overflow      (summary_failure_error)
    UpstreamError                 summary_model_error, summary_retries_exhausted
"""

from app.core.compaction.checkpoint import (
    SUMMARY_PREAMBLE,
    Checkpoint,
    CompactionKind,
    LastUserRequest,
    compacted_projection,
    install_tail,
    rewind_checkpoint,
    select_last_user_request,
    summary_item_text,
)
from app.core.compaction.local import is_summary_request, local_reply, local_summary
from app.core.compaction.reminder import MAX_REMINDER_CHARS, render_reminder
from app.core.compaction.replay import (
    CompactionSelector,
    LatestSelector,
    ReplaySelector,
    ThroughMessageSelector,
    checkpoint_installed_through,
    parse_replay_selector,
    replay_through_message,
)
from app.core.compaction.request import (
    SUMMARY_HEADINGS,
    SUMMARY_INSTRUCTION,
    summary_capabilities,
    summary_request_conversation,
)
from app.core.compaction.retry import (
    AttemptFailure,
    FailureClass,
    RetryPolicy,
    classify_provider_error,
    summary_failure_error,
)
from app.core.compaction.runtime_state import (
    Extension,
    RuntimeState,
    RuntimeStateError,
    derive_runtime_state,
    edited_paths,
    runtime_state_from_json,
    runtime_state_to_json,
)
from app.core.compaction.transcript import (
    CONVERSATION_HISTORY_TOOL,
    HistoryArgumentsInvalid,
    TranscriptPage,
    TranscriptQuery,
    compaction_not_found,
    parse_conversation_history_arguments,
    render_transcript_page,
    transcript_page,
    unknown_compaction_id,
)
from app.core.compaction.validation import MIN_SUMMARY_CHARS, SummaryInvalid, validate_summary

__all__ = [
    "CONVERSATION_HISTORY_TOOL",
    "MAX_REMINDER_CHARS",
    "MIN_SUMMARY_CHARS",
    "SUMMARY_HEADINGS",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_PREAMBLE",
    "AttemptFailure",
    "Checkpoint",
    "CompactionKind",
    "CompactionSelector",
    "Extension",
    "FailureClass",
    "HistoryArgumentsInvalid",
    "LastUserRequest",
    "LatestSelector",
    "ReplaySelector",
    "RetryPolicy",
    "RuntimeState",
    "RuntimeStateError",
    "SummaryInvalid",
    "ThroughMessageSelector",
    "TranscriptPage",
    "TranscriptQuery",
    "checkpoint_installed_through",
    "classify_provider_error",
    "compacted_projection",
    "compaction_not_found",
    "derive_runtime_state",
    "edited_paths",
    "install_tail",
    "is_summary_request",
    "local_reply",
    "local_summary",
    "parse_conversation_history_arguments",
    "parse_replay_selector",
    "render_reminder",
    "render_transcript_page",
    "replay_through_message",
    "rewind_checkpoint",
    "runtime_state_from_json",
    "runtime_state_to_json",
    "select_last_user_request",
    "summary_capabilities",
    "summary_failure_error",
    "summary_item_text",
    "summary_request_conversation",
    "transcript_page",
    "unknown_compaction_id",
    "validate_summary",
]
