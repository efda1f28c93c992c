"""Property: an answer a codec renders, sent back by the client as its protocol's history, reads
as the very assistant message the service stored (what keeps a proxied session one session)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.api.compat.anthropic_messages import CODEC as ANTHROPIC
from app.api.compat.openai_responses import CODEC as RESPONSES
from app.core.content import ProviderOpaqueBlock, ToolCallBlock, compact_json
from app.providers.base import ModelResponse

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(min_size=1, max_size=30)
IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
ARGUMENTS = st.dictionaries(IDS, st.one_of(st.integers(), TEXT, st.booleans()), max_size=3)


def _calls(draw: st.DrawFn) -> list[ToolCallBlock]:
    ids = draw(st.lists(IDS, max_size=3, unique=True))
    return [
        {
            "type": "tool_call",
            "id": f"call_{i}",
            "name": draw(IDS),
            "input": compact_json(draw(ARGUMENTS)),
        }
        for i in ids
    ]


@st.composite
def anthropic_answers(draw: st.DrawFn) -> ModelResponse:
    thinking = draw(st.one_of(st.just(""), TEXT))
    opaque: list[ProviderOpaqueBlock] = []
    if thinking and draw(st.booleans()):
        payload = {"signature": draw(IDS)}
        opaque.append(
            {
                "type": "provider_opaque",
                "driver": "anthropic",
                "kind": "thinking",
                "payload": payload,
            }
        )
    if draw(st.booleans()):
        payload = {"data": draw(IDS)}
        opaque.append(
            {
                "type": "provider_opaque",
                "driver": "anthropic",
                "kind": "redacted_thinking",
                "payload": payload,
            }
        )
    text = draw(st.one_of(st.just(""), TEXT))
    calls = _calls(draw)
    return ModelResponse(text=text, thinking=thinking, provider_opaque=opaque, tool_calls=calls)


@st.composite
def responses_answers(draw: st.DrawFn) -> ModelResponse:
    summaries = draw(st.lists(TEXT, max_size=2))
    opaque: list[ProviderOpaqueBlock] = []
    if summaries or draw(st.booleans()):
        item: dict[str, Any] = {
            "id": f"rs_{draw(IDS)}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": s} for s in summaries],
            "encrypted_content": draw(IDS),
        }
        opaque.append(
            {
                "type": "provider_opaque",
                "driver": "openai_responses",
                "kind": "reasoning",
                "payload": item,
            }
        )
    text = draw(st.one_of(st.just(""), TEXT))
    return ModelResponse(
        text=text, thinking="".join(summaries), provider_opaque=opaque, tool_calls=_calls(draw)
    )


@FAST
@given(anthropic_answers())
def test_an_anthropic_answer_sent_back_reads_as_the_stored_message(answer: ModelResponse) -> None:
    rendered = ANTHROPIC.render(answer, model="m", response_id="msg_1")
    if not rendered["content"]:
        return  # an empty answer: nothing the client could send back
    request = ANTHROPIC.decode(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": rendered["content"]},
            ],
        }
    )
    assert request.messages[1].content == answer.assistant_content()


@FAST
@given(responses_answers())
def test_a_responses_answer_sent_back_reads_as_the_stored_message(answer: ModelResponse) -> None:
    rendered = RESPONSES.render(answer, model="m", response_id="resp_1")
    if not rendered["output"]:
        return
    request = RESPONSES.decode(
        {"model": "m", "input": [{"role": "user", "content": "q"}, *rendered["output"]]}
    )
    assert request.messages[1].content == answer.assistant_content()
