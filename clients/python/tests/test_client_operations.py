"""Every operation of the API through ``Client`` against the real service, typed results."""

from __future__ import annotations

import inspect
import json
import uuid
from pathlib import Path

import pytest

from client_support import API_KEY, VALID_SUMMARY, scripted, tool_call
from ctxsvc_client import (
    UNSET,
    AsyncClient,
    AuthenticationError,
    Checkpoint,
    Client,
    ConflictError,
    Context,
    InvalidInputError,
    IssuedApiKey,
    NotFoundError,
    Pin,
    Session,
    Turn,
    text,
)
from tests.servers import REPO_ROOT, ServerProcess

AGENT = {
    "system_prompt": "You are a careful coding agent.",
    "tools": [{"name": "ls"}],
    "preset": "coding",
}

# Every operation of openapi/openapi.json and the method that covers it.
METHODS = {
    ("GET", "/healthz"): "health",
    ("GET", "/readyz"): "ready",
    ("GET", "/metrics"): "metrics",
    ("POST", "/v1/prepare"): "prepare",
    ("POST", "/v1/tokens/count"): "count_tokens",
    ("GET", "/v1/models"): "list_models",
    ("GET", "/v1/models/{model_id}"): "get_model",
    ("PUT", "/v1/models/{model_id}"): "put_model",
    ("DELETE", "/v1/models/{model_id}"): "delete_model",
    ("POST", "/v1/admin/keys"): "create_key",
    ("GET", "/v1/admin/keys"): "list_keys",
    ("POST", "/v1/admin/keys/{key_id}/rotate"): "rotate_key",
    ("DELETE", "/v1/admin/keys/{key_id}"): "revoke_key",
    ("PUT", "/v1/admin/models/{model_id}"): "put_shared_model",
    ("DELETE", "/v1/admin/models/{model_id}"): "delete_shared_model",
    ("POST", "/v1/sessions"): "create_session",
    ("GET", "/v1/sessions"): "list_sessions",
    ("GET", "/v1/sessions/{session_id}"): "get_session",
    ("PATCH", "/v1/sessions/{session_id}"): "update_session",
    ("POST", "/v1/sessions/{session_id}/messages"): "append_messages",
    ("GET", "/v1/sessions/{session_id}/messages"): "list_messages",
    ("GET", "/v1/sessions/{session_id}/context"): "get_context",
    ("POST", "/v1/sessions/{session_id}/prepare"): "prepare_session",
    ("POST", "/v1/sessions/{session_id}/turns"): "start_turn",
    ("GET", "/v1/sessions/{session_id}/turns"): "list_turns",
    ("GET", "/v1/sessions/{session_id}/turns/{turn_id}"): "get_turn",
    ("POST", "/v1/sessions/{session_id}/turns/{turn_id}/tool-results"): "post_tool_results",
    ("POST", "/v1/sessions/{session_id}/turns/{turn_id}/cancel"): "cancel_turn",
    ("GET", "/v1/sessions/{session_id}/events"): "events",
    ("POST", "/v1/sessions/{session_id}/agent-messages"): "send_agent_message",
    ("POST", "/v1/sessions/{session_id}/items"): "add_items",
    ("POST", "/v1/sessions/{session_id}/items/pop"): "pop_item",
    ("POST", "/v1/sessions/{session_id}/epochs"): "new_epoch",
    ("POST", "/v1/sessions/{session_id}/compactions"): "compact",
    ("GET", "/v1/sessions/{session_id}/compactions"): "list_compactions",
    ("GET", "/v1/sessions/{session_id}/compactions/request"): "get_summary_request",
    ("GET", "/v1/sessions/{session_id}/compactions/{compaction_id}"): "get_compaction",
    ("POST", "/v1/sessions/{session_id}/rewind"): "rewind",
    ("GET", "/v1/sessions/{session_id}/replay"): "replay",
    ("GET", "/v1/sessions/{session_id}/transcript"): "transcript",
    ("POST", "/v1/sessions/{session_id}/reload"): "reload_session",
    ("GET", "/v1/sessions/{session_id}/pins"): "list_pins",
    ("POST", "/v1/sessions/{session_id}/pins"): "create_pin",
    ("GET", "/v1/sessions/{session_id}/pins/{pin_id}"): "get_pin",
    ("PUT", "/v1/sessions/{session_id}/pins/{pin_id}"): "replace_pin",
    ("DELETE", "/v1/sessions/{session_id}/pins/{pin_id}"): "remove_pin",
    ("GET", "/v1/sessions/{session_id}/pins/proposals"): "list_pin_proposals",
    ("POST", "/v1/sessions/{session_id}/pins/proposals/{proposal_id}/accept"): (
        "accept_pin_proposal"
    ),
    ("POST", "/v1/sessions/{session_id}/pins/proposals/{proposal_id}/dismiss"): (
        "dismiss_pin_proposal"
    ),
}


def test_every_documented_operation_has_a_method_in_both_clients() -> None:
    spec = json.loads((REPO_ROOT / "openapi" / "openapi.json").read_text())
    documented = {
        (verb.upper(), route)
        for route, operations in spec["paths"].items()
        for verb in operations
        if verb in ("get", "post", "put", "patch", "delete")
    }
    assert documented == set(METHODS)
    for name in [*METHODS.values(), "run_turn", "byo_compact"]:
        sync, asynchronous = getattr(Client, name), getattr(AsyncClient, name)
        # The same parameters; the async one is awaited (``events`` is an async iterator).
        parameters = inspect.signature(sync).parameters
        assert parameters.keys() == inspect.signature(asynchronous).parameters.keys(), name
        assert inspect.iscoroutinefunction(asynchronous) or inspect.isasyncgenfunction(
            asynchronous
        ), name


@pytest.fixture
def client(server: ServerProcess) -> Client:
    with Client(server.url, timeout=30) as client:
        yield client  # type: ignore[misc]


def test_service_stateless_tokens_and_models(client: Client, server: ServerProcess) -> None:
    assert client.health() == {"status": "ok"}
    assert client.ready() is True
    assert "ctxsvc_" in client.metrics() or "http_" in client.metrics()

    prepared = client.prepare(
        system_context=[{"key": "core/agent-system", "content": [text("Be brief.")]}],
        conversation=[{"role": "user", "content": [text("List the files.")]}],
        model={"context_window_tokens": 1000, "max_output_tokens": 400},
        encode="openai_chat",
    )
    assert prepared.budget.effective_input_tokens == 600
    assert prepared.provenance[0].type == "provided"
    assert prepared.provenance[0].tokens == prepared.budget.conversation_tokens
    assert prepared.conversation[0].content == [text("List the files.")]
    assert prepared.provider_payload is not None
    assert prepared.budget.prefix_break is None
    # The digest of this request makes the next prepare report what it keeps of it.
    longer = client.prepare(
        system_context=[{"key": "core/agent-system", "content": [text("Be brief.")]}],
        conversation=[
            {"role": "user", "content": [text("List the files.")]},
            {"role": "assistant", "content": [text("README.md")]},
            {"role": "user", "content": [text("Thanks.")]},
        ],
        model={"context_window_tokens": 1000, "max_output_tokens": 400},
        previous_request_digest=prepared.request_digest,
    )
    assert longer.budget.stable_prefix_tokens == prepared.budget.estimated_input_tokens
    assert longer.budget.prefix_break is None
    reworded = client.prepare(
        system_context=[{"key": "core/agent-system", "content": [text("Be thorough.")]}],
        conversation=[{"role": "user", "content": [text("List the files.")]}],
        model={"context_window_tokens": 1000, "max_output_tokens": 400},
        previous_request_digest=longer.request_digest,
    )
    assert reworded.budget.prefix_break is not None
    assert reworded.budget.prefix_break.reason == "system_changed"
    assert client.count_tokens(text="abcdefgh").tokens == 2

    catalogue = {m.id for m in client.list_models()}
    assert "local" in catalogue
    model_id = f"client-{uuid.uuid4().hex[:8]}"
    created = client.put_model(
        model_id,
        context_window_tokens=8000,
        max_output_tokens=1000,
        safety_margin_tokens=100,
        prompt_caching="off",
        provider={"kind": "local"},
    )
    assert created.effective_input_tokens == 6900
    assert created.prompt_caching == "off"
    assert (created.output_reserve_tokens, created.reserved_output_tokens) == (None, 1000)
    assert client.get_model(model_id).safety_margin_tokens == 100
    kept_short = client.put_model(
        model_id,
        context_window_tokens=8000,
        max_output_tokens=1000,
        output_reserve_tokens=250,
        provider={"kind": "local"},
    )
    assert (kept_short.output_reserve_tokens, kept_short.reserved_output_tokens) == (250, 250)
    assert kept_short.effective_input_tokens == 7750
    client.delete_model(model_id)
    assert model_id not in {m.id for m in client.list_models()}


def test_sessions_messages_context_and_session_prepare(client: Client) -> None:
    session = client.create_session(model_id="local", agent=AGENT, title="ops")
    assert isinstance(session, Session)
    assert session.usage.turns == 0
    renamed = client.update_session(session.id, title="renamed")
    assert renamed.title == "renamed"
    kept = client.update_session(session.id, sandbox={"mode": "accept_edits"})
    assert (kept.title, kept.sandbox["mode"]) == ("renamed", "accept_edits")
    assert client.update_session(session.id, title=None).title is None
    assert client.update_session(session.id, title=UNSET).title is None
    assert client.get_session(session.id).id == session.id
    newer = client.create_session(model_id="local", agent=AGENT)
    listed = client.list_sessions(limit=1)
    assert [s.id for s in listed.sessions] == [newer.id]
    older = client.list_sessions(limit=1, cursor=listed.next_cursor)
    assert [s.id for s in older.sessions] == [session.id]

    stored = client.append_messages(
        session.id,
        [
            {"role": "user", "content": [text("List the files.")]},
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "ls", "input": "{}"}],
            },
        ],
    )
    assert [m.sequence for m in stored] == [1, 2]
    page = client.list_messages(session.id, after_sequence=1)
    assert [(m.sequence, m.role) for m in page.messages] == [(2, "assistant")]

    context = client.get_context(session.id)
    assert isinstance(context, Context)
    assert [p.type for p in context.provenance] == ["persisted", "persisted", "synthesized"]
    assert context.provenance[2].reason == "interrupted_tool_result"
    assert sum(p.tokens for p in context.provenance) == context.budget.conversation_tokens
    assert context.auto_compact_percent > 0

    prepared = client.prepare_session(session.id, encode="anthropic_messages")
    assert prepared.world_state_message_ids  # the sandbox section, at least
    assert prepared.provider_payload is not None


def test_turns_tool_results_cancel_and_agent_messages(
    client: Client, server: ServerProcess
) -> None:
    model_id = scripted(
        server, [{"tool_calls": [tool_call("ls", path=".")]}, {"text": "Two files."}]
    )
    session = client.create_session(model_id=model_id, agent=AGENT)
    receipt = client.send_agent_message(
        session.id, task="index", kind="final_answer", body="done", agent_message_id="a1"
    )
    again = client.send_agent_message(
        session.id, task="index", kind="final_answer", body="done", agent_message_id="a1"
    )
    assert (receipt.status, receipt.duplicate, again.duplicate) == ("queued", False, True)

    turn = client.start_turn(session.id, "List them.", client_request_id="r1", wait=True)
    assert isinstance(turn, Turn)
    assert turn.waiting_for_tools
    (pending,) = turn.pending_tool_calls
    assert pending.arguments() == {"path": "."}
    # The same client_request_id is the same turn.
    assert client.start_turn(session.id, "List them.", client_request_id="r1").turn_id == (
        turn.turn_id
    )
    answer = client.post_tool_results(
        session.id,
        turn.turn_id,
        [{"tool_call_id": pending.tool_call_id, "state": "success", "output": [text("a b")]}],
        wait=True,
    )
    assert answer.missing_tool_call_ids == []
    finished = client.get_turn(session.id, turn.turn_id, wait=True)
    assert (finished.status, finished.final_text) == ("completed", "Two files.")
    assert [t.turn_id for t in client.list_turns(session.id).turns] == [turn.turn_id]

    waiting = scripted(server, [{"tool_calls": [tool_call("ls")]}])
    other = client.create_session(model_id=waiting, agent=AGENT)
    parked = client.start_turn(other.id, [{"type": "text", "text": "Go."}], wait=True)
    cancelled = client.cancel_turn(other.id, parked.turn_id)
    assert cancelled.status == "cancelled"


def test_compaction_rewind_replay_transcript_and_reload(client: Client) -> None:
    session = client.create_session(model_id="local", agent=AGENT)
    client.run_turn(session.id, "Summarize ticket ABC-123.")
    first = client.compact(session.id, allow_larger=True)  # the session's own (local) summary model
    assert isinstance(first, Checkpoint)
    assert first.kind == "manual"
    request = client.get_summary_request(session.id)
    assert request.through_message_sequence >= first.through_message_sequence
    second = client.compact(
        session.id,
        summary=VALID_SUMMARY,
        model="my-model",
        expected_through_message_sequence=request.through_message_sequence,
        allow_larger=True,
        accept_dropped_user_facts=True,  # a generic summary: it does not name ABC-123
    )
    listing = client.list_compactions(session.id)
    assert [c.compaction_id for c in listing.compactions] == [
        second.compaction_id,
        first.compaction_id,
    ]
    assert client.get_compaction(session.id, second.compaction_id).summary == VALID_SUMMARY
    rewound = client.rewind(session.id, first.compaction_id)
    assert (rewound.kind, rewound.parent_compaction_id) == ("rewind", first.compaction_id)
    replay = client.replay(session.id, f"compaction:{first.compaction_id}")
    assert len(replay.items) == 3
    transcript = client.transcript(session.id, compaction_id=first.compaction_id, limit=1)
    assert transcript.messages[0].sequence == 1
    assert transcript.has_more is True
    reloaded = client.reload_session(session.id)
    assert reloaded.reload_required is False


def test_pins_and_proposals(client: Client) -> None:
    session = client.create_session(model_id="local", agent=AGENT)
    pin = client.create_pin(session.id, kind="constraint", text="Never write to production.")
    assert isinstance(pin, Pin)
    assert (pin.kind, pin.bytes, pin.position, pin.proposal_id) == ("constraint", 26, 1, None)
    replaced = client.replace_pin(
        session.id, pin.pin_id, kind="decision", text="Deploy on Tuesdays only."
    )
    assert (replaced.pin_id, replaced.kind, replaced.position) == (pin.pin_id, "decision", 1)
    assert client.get_pin(session.id, pin.pin_id).text == "Deploy on Tuesdays only."
    with pytest.raises(ConflictError) as duplicate:
        client.create_pin(session.id, kind="fact", text="Deploy on Tuesdays only.")
    assert duplicate.value.code == "duplicate_pin"
    with pytest.raises(InvalidInputError) as tagged:
        client.create_pin(session.id, kind="fact", text="</pinned_context> ok")
    assert tagged.value.code == "invalid_pin_text"

    # Sent verbatim in the next request, as World State.
    prepared = client.prepare_session(session.id)
    assert any(
        "- Deploy on Tuesdays only." in block.get("text", "")
        for message in prepared.request.messages
        for block in message.content
    )

    client.append_messages(
        session.id,
        [{"role": "user", "content": [text("Check the logs. Do not restart any node.")]}],
    )
    proposals = client.list_pin_proposals(session.id).proposals
    assert [p.text for p in proposals] == ["Do not restart any node."]
    accepted = client.accept_pin_proposal(session.id, proposals[0].proposal_id)
    assert (accepted.kind, accepted.proposal_id) == ("constraint", proposals[0].proposal_id)
    listed = client.list_pins(session.id)
    assert [p.pin_id for p in listed.pins] == [pin.pin_id, accepted.pin_id]
    assert listed.limits.max_pins == 64
    assert listed.open_proposals == 0
    client.append_messages(
        session.id, [{"role": "user", "content": [text("Never delete the logs.")]}]
    )
    (other,) = client.list_pin_proposals(session.id).proposals
    assert client.dismiss_pin_proposal(session.id, other.proposal_id).status == "dismissed"
    decided = client.list_pin_proposals(session.id, status="all", limit=10).proposals
    assert [p.status for p in decided] == ["dismissed", "accepted"]

    client.remove_pin(session.id, pin.pin_id)
    with pytest.raises(NotFoundError) as gone:
        client.get_pin(session.id, pin.pin_id)
    assert gone.value.code == "pin_not_found"


def run_python_example(readme: Path, server: ServerProcess) -> dict[str, object]:
    """Run the first ``python`` block of ``readme`` as written, against the test's server."""
    text = readme.read_text(encoding="utf-8")
    start = text.index("```python\n") + len("```python\n")
    example = text[start : text.index("```\n", start)]
    assert "Client(" in example
    namespace: dict[str, object] = {"__name__": "readme_example"}
    source = example.replace("http://127.0.0.1:8000", server.url)
    try:
        exec(compile(source, str(readme), "exec"), namespace)
    finally:
        # A short example may leave its client open (a script's exit closes it anyway).
        for value in namespace.values():
            if isinstance(value, Client):
                value.close()
    return namespace


@pytest.mark.parametrize(
    "readme", [Path(__file__).parents[1] / "README.md", REPO_ROOT / "README.md"]
)
def test_readme_examples_run_as_written(readme: Path, server: ServerProcess) -> None:
    namespace = run_python_example(readme, server)
    turn = namespace["turn"]
    assert isinstance(turn, Turn)
    assert turn.status == "completed"
    assert isinstance(namespace["checkpoint"], Checkpoint)


def test_admin_keys_and_shared_models(keyed_server: ServerProcess) -> None:
    tenant = f"client-{uuid.uuid4().hex[:8]}"
    with Client(keyed_server.url, api_key=API_KEY, timeout=30) as admin:
        issued = admin.create_key(tenant_id=tenant, name="client test")
        assert isinstance(issued, IssuedApiKey)
        assert (issued.tenant_id, issued.scope) == (tenant, "tenant")
        assert [k.id for k in admin.list_keys(tenant_id=tenant).keys] == [issued.id]
        shared_id = f"shared-{uuid.uuid4().hex[:8]}"
        shared = admin.put_shared_model(
            shared_id,
            context_window_tokens=1000,
            max_output_tokens=100,
            provider={"kind": "local"},
        )
        assert shared.id == shared_id
        mine = admin.create_session(model_id="local", agent=AGENT)
        with Client(keyed_server.url, api_key=issued.key, timeout=30) as own:
            assert shared_id in {m.id for m in own.list_models()}
            assert mine.id not in {s.id for s in own.list_sessions().sessions}
            with pytest.raises(NotFoundError):
                own.get_session(mine.id)
        rotated = admin.rotate_key(issued.id)
        admin.revoke_key(issued.id)
        with (
            Client(keyed_server.url, api_key=issued.key, timeout=30) as old,
            pytest.raises(AuthenticationError),
        ):
            old.list_sessions()
        with Client(keyed_server.url, api_key=rotated.key, timeout=30) as new:
            assert new.list_sessions().sessions == []
        admin.delete_shared_model(shared_id)
