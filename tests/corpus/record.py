"""The recorded corpus: what the stored-session paths send, kept byte for byte.

A fixed set of sessions (tool-heavy, at the pruning watermark, compacted, with World State,
with pins, prompt caching on and off) is driven through the app in-process on a fresh SQLite
database: context inspections, session prepares and turns of offline models. Each output — the
prepared request, its budget, its provider payload in every encoding, its ``request_digest``,
and for a turn every request its model received, as the wire bytes each protocol would send —
is written to ``corpus.json``; ``test_corpus`` replays the same inputs and asserts the same
outputs. Any reuse (of a Conversation read, of an earlier preparation, of encoded messages) must
leave them unchanged, so a change to how reuse works is checked against the code it replaced.

Ids are generated per calling module from a fixed seed (``deterministic_ids``), so a session's
messages get the same ids whatever ran before; the workspace lives at a fixed path.

Re-record (only when the outputs are meant to change): ``python -m tests.corpus.record``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from app.core.caching.breakpoints import CachePlan
from app.providers import offline
from app.providers.encoding import encode
from app.providers.encoding.wire import (
    anthropic_messages_body,
    openai_chat_body,
    openai_responses_body,
)
from app.storage.migrate import upgrade_to_head
from tests.api.helpers import (
    append,
    assistant,
    assistant_calls,
    new_session,
    tool_result,
    user,
)
from tests.conftest import client_for, make_settings

CORPUS = Path(__file__).with_name("corpus.json")
# A fixed path: World State names the working directory in the request.
WORKSPACE = Path("/tmp/ctxsvc-corpus-v1")
ENCODINGS = ("openai_chat", "anthropic_messages", "openai_responses")

Output = dict[str, Any]


# ----- determinism -----------------------------------------------------------------------------


@contextmanager
def deterministic_ids() -> Iterator[None]:
    """``uuid.uuid4`` from a generator per calling module, seeded by its name: the ids a module
    makes depend only on how many it made before (not on other modules' timing)."""
    generators: dict[str, random.Random] = {}
    original = uuid.uuid4

    def uuid4() -> uuid.UUID:
        module = str(sys._getframe(1).f_globals.get("__name__", ""))
        rng = generators.setdefault(module, random.Random(module))
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    uuid.uuid4 = uuid4
    try:
        yield
    finally:
        uuid.uuid4 = original


def make_workspace() -> Path:
    """The same tree every time (written, never removed: concurrent runs write equal files)."""
    repo = WORKSPACE / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    (repo / "src").mkdir(exist_ok=True)
    (repo / "README.md").write_text("hello\n")
    (repo / "AGENTS.md").write_text("Be brief. Run the tests before answering.\n")
    return repo


@contextmanager
def captured_model_requests(sink: list[Output]) -> Iterator[None]:
    """Every request an offline model receives, as the wire bytes of each protocol (with the
    call's cache breakpoints)."""
    originals = {cls: cls.complete for cls in (offline.LocalClient, offline.ScriptedClient)}

    def wrap(complete: Callable[..., Any]) -> Callable[..., Any]:
        async def recording(
            self: Any,
            request: dict[str, Any],
            *,
            caching: CachePlan | None = None,
            **rest: Any,
        ) -> Any:
            sink.append(wire(request, caching))
            return await complete(self, request, caching=caching, **rest)

        return recording

    for cls, complete in originals.items():
        cls.complete = wrap(complete)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, complete in originals.items():
            cls.complete = complete  # type: ignore[method-assign]


def digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}:{len(data)}"


def canonical(value: Any) -> str:
    """The digest of ``value``'s JSON as the app returned it (keys in its order)."""
    return digest(json.dumps(value, ensure_ascii=False).encode())


def wire(request: dict[str, Any], caching: CachePlan | None) -> Output:
    """The request's own JSON and, per protocol, the digest of the body bytes it would send
    (plus the plain ``encode`` dict's, which those bytes must equal)."""
    bodies = {
        "openai_chat": openai_chat_body,
        "anthropic_messages": anthropic_messages_body,
        "openai_responses": openai_responses_body,
    }
    out: Output = {"request": canonical(request)}
    for name, body in bodies.items():
        sent = body(request, model="m", stream=True, caching=caching)
        plain = encode(request, name, model="m", stream=True, caching=caching)  # type: ignore[arg-type]
        out[name] = digest(sent)
        out[f"{name}_plain"] = digest(json.dumps(plain, ensure_ascii=False).encode())
    return out


# ----- the calls -------------------------------------------------------------------------------


def prepared(answer: dict[str, Any]) -> Output:
    """A prepare answer: the request in full, the rest that says what it was built from."""
    return {
        "request": canonical(answer["request"]),
        "budget": answer["budget"],
        "projection": answer["projection"],
        "provenance": canonical(answer["provenance"]),
        "provider_payload": canonical(answer["provider_payload"]),
        "request_digest": answer["request_digest"],
        "auto_compact_percent": answer.get("auto_compact_percent"),
        "world_state_message_ids": answer.get("world_state_message_ids"),
    }


async def inspect(api: httpx.AsyncClient, sid: str) -> Output:
    out: Output = {}
    for encoding in ENCODINGS:
        response = await api.get(f"/v1/sessions/{sid}/context", params={"encode_as": encoding})
        assert response.status_code == 200, response.text
        out[encoding] = prepared(response.json())
    return {"inspect": out}


async def session_prepare(api: httpx.AsyncClient, sid: str, encoding: str) -> Output:
    response = await api.post(
        f"/v1/sessions/{sid}/prepare", params={"encode_as": encoding}, json={}
    )
    assert response.status_code == 200, response.text
    return {"prepare": prepared(response.json())}


async def turn(
    api: httpx.AsyncClient, sid: str, text: str, requests: list[Output], key: int
) -> Output:
    """A turn (and its tool rounds: every pending call gets a result) and what its model got."""
    del requests[:]
    body = {"client_request_id": f"corpus-{key}", "input": [{"type": "text", "text": text}]}
    response = await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
    assert response.status_code in (200, 202), response.text
    state = response.json()
    while state["status"] == "running" and state["phase"] == "waiting_tool_results":
        results = [
            {
                "tool_call_id": call["tool_call_id"],
                "state": "success",
                "output": [{"type": "text", "text": f"body of {call['input']}\n" * 40}],
            }
            for call in state["pending_tool_calls"]
        ]
        response = await api.post(
            f"/v1/sessions/{sid}/turns/{state['turn_id']}/tool-results",
            params={"wait": "true"},
            json={"results": results},
        )
        assert response.status_code in (200, 202), response.text
        state = response.json()
    return {
        "turn": {
            "status": state["status"],
            "outcome": state.get("outcome"),
            "model_calls": state.get("model_calls"),
            "requests": list(requests),
        }
    }


# ----- the sessions ----------------------------------------------------------------------------


async def model(api: httpx.AsyncClient, name: str, script: list[Any] | None, **caps: Any) -> str:
    provider: dict[str, Any] = (
        {"kind": "local"}
        if script is None
        else {
            "kind": "scripted",
            "script": script,
        }
    )
    body = {"context_window_tokens": 100_000, "max_output_tokens": 1000, "provider": provider}
    body.update(caps)
    response = await api.put(f"/v1/models/{name}", json=body)
    assert response.status_code in (200, 201), response.text
    return name


def read(path: str) -> dict[str, Any]:
    return {"name": "read", "input": {"path": path}}


def plan(step: str) -> dict[str, Any]:
    return {"name": "update_plan", "input": {"plan": [{"step": step, "status": "in_progress"}]}}


def tool_rounds(start: int, count: int, size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(start, start + count):
        messages += [
            user(f"step {i}: look at file {i}"),
            assistant_calls((f"c{i}", "read")),
            tool_result(f"c{i}", f"line {i} of the file\n" * size),
            assistant(f"file {i} read"),
        ]
    return messages


async def tool_heavy(api: httpx.AsyncClient, caching: str) -> list[Output]:
    """Caller-run tools, appended and in turns; inspections between them (extending reads)."""
    script = [
        {"tool_calls": [read("a.py"), read("b.py")]},
        {"tool_calls": [plan("compare")]},
        {"tool_calls": [read("c.py")]},
        {"text": "All three read."},
        {"tool_calls": [plan("again"), read("d.py")]},
        {"text": "Done."},
    ]
    mid = await model(api, f"corpus-tools-{caching}", script, prompt_caching=caching)
    sid = await new_session(api, model_id=mid)
    await append(api, sid, *tool_rounds(0, 6, 20))
    outputs = [await inspect(api, sid)]
    await append(api, sid, *tool_rounds(6, 3, 20))
    outputs.append(await inspect(api, sid))
    requests: list[Output] = []
    with captured_model_requests(requests):
        outputs.append(await turn(api, sid, "read the three files", requests, 1))
        outputs.append(await inspect(api, sid))
        outputs.append(await turn(api, sid, "once more", requests, 2))
    outputs.append(await inspect(api, sid))
    outputs.append(await session_prepare(api, sid, "anthropic_messages"))
    outputs.append(await inspect(api, sid))
    return outputs


async def pruning(api: httpx.AsyncClient) -> list[Output]:
    """Tool results over the trigger line: prepare prunes them (the watermark moves)."""
    small = {"context_window_tokens": 6000, "max_output_tokens": 500}
    mid = await model(api, "corpus-prune", [{"text": "ok"}, {"text": "ok again"}], **small)
    sid = await new_session(api, model_id=mid, summary_model_id="local")
    await append(api, sid, *tool_rounds(0, 16, 40))
    outputs = [await inspect(api, sid), await session_prepare(api, sid, "openai_chat")]
    outputs.append(await inspect(api, sid))
    await append(api, sid, *tool_rounds(16, 16, 40))
    requests: list[Output] = []
    with captured_model_requests(requests):
        outputs.append(await turn(api, sid, "go on", requests, 3))
    outputs.append(await inspect(api, sid))
    return outputs


def exchanges(start: int, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(start, start + count):
        messages += [user(f"request {i}: " + "x" * 1000), assistant(f"answer {i} " + "y" * 1000)]
    return messages


async def compaction(api: httpx.AsyncClient) -> list[Output]:
    """No tool results to prune: prepare compacts; later a turn compacts at the line too."""
    small = {"context_window_tokens": 4000, "max_output_tokens": 500}
    mid = await model(api, "corpus-compact", [{"text": "done"}, {"text": "done again"}], **small)
    sid = await new_session(
        api, model_id=mid, summary_model_id="local", agent={"system_prompt": "Be careful."}
    )
    await append(api, sid, *exchanges(0, 7))
    outputs = [await inspect(api, sid), await session_prepare(api, sid, "anthropic_messages")]
    outputs.append(await inspect(api, sid))
    await append(api, sid, *exchanges(7, 7))
    requests: list[Output] = []
    with captured_model_requests(requests):
        outputs.append(await turn(api, sid, "continue please", requests, 4))
        outputs.append(await inspect(api, sid))
        outputs.append(await turn(api, sid, "and again", requests, 5))
    outputs.append(await inspect(api, sid))
    return outputs


async def world_state(api: httpx.AsyncClient, repo: Path) -> list[Output]:
    """A workspace session: prepare samples World State, a turn samples again after a change."""
    script = [{"tool_calls": [read("README.md")]}, {"text": "read it"}, {"text": "bye"}]
    mid = await model(api, "corpus-world", script, prompt_caching="off")
    sid = await new_session(api, model_id=mid, workspace={"working_directory": str(repo)})
    await append(api, sid, user("fix the build"))
    outputs = [await session_prepare(api, sid, "openai_chat"), await inspect(api, sid)]
    requests: list[Output] = []
    with captured_model_requests(requests):
        outputs.append(await turn(api, sid, "read the readme", requests, 6))
        outputs.append(await turn(api, sid, "thanks", requests, 7))
    outputs.append(await session_prepare(api, sid, "openai_responses"))
    return outputs


async def pins(api: httpx.AsyncClient) -> list[Output]:
    """Pins reach every request (World State ``session/pins``); one changes between turns."""
    script = [{"text": "noted"}, {"tool_calls": [plan("check pins")]}, {"text": "still noted"}]
    mid = await model(api, "corpus-pins", script)
    sid = await new_session(api, model_id=mid)
    for kind, text in (("constraint", "Never modify prod."), ("fact", "Incident INC-42.")):
        response = await api.post(f"/v1/sessions/{sid}/pins", json={"kind": kind, "text": text})
        assert response.status_code == 201, response.text
    await append(api, sid, user("what do we know?"))
    outputs = [await inspect(api, sid)]
    requests: list[Output] = []
    with captured_model_requests(requests):
        outputs.append(await turn(api, sid, "summarise", requests, 8))
        response = await api.post(
            f"/v1/sessions/{sid}/pins", json={"kind": "fact", "text": "Started 09:12 UTC."}
        )
        assert response.status_code == 201, response.text
        outputs.append(await turn(api, sid, "and now?", requests, 9))
    outputs.append(await session_prepare(api, sid, "anthropic_messages"))
    return outputs


async def record_all(database: Path) -> dict[str, list[Output]]:
    """Every session's outputs, on a fresh database at ``database``."""
    url = f"sqlite+aiosqlite:///{database}"
    await upgrade_to_head(url)
    repo = make_workspace()
    corpus: dict[str, list[Output]] = {}
    settings = make_settings(url, workspace_roots=[str(WORKSPACE)])
    with deterministic_ids():
        async for api in client_for(settings):
            corpus["tool_heavy_caching_auto"] = await tool_heavy(api, "auto")
            corpus["tool_heavy_caching_off"] = await tool_heavy(api, "off")
            corpus["pruning"] = await pruning(api)
            corpus["compaction"] = await compaction(api)
            corpus["world_state"] = await world_state(api, repo)
            corpus["pins"] = await pins(api)
    return corpus


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = asyncio.run(record_all(Path(tmp) / "corpus.db"))
    CORPUS.write_text(json.dumps(corpus, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {CORPUS} ({CORPUS.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
