"""README's tour, run as a newcomer runs it: each ``bash`` block of "A short tour", verbatim,
against a real ``ctxsvc serve`` started as README's first command starts it.

Two things differ from a reader's terminal, both mechanical: the server listens on a free port
instead of 8000 (the address in the snippets is rewritten), and the never-ending event stream
(``curl -N …/events``) is read up to its first update by piping it to ``head`` (the server's
heartbeat is fast, so curl notices the closed pipe at once).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers import REPO_ROOT, ServerProcess, clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

README = REPO_ROOT / "README.md"
README_ADDRESS = "http://127.0.0.1:8000"
BLOCK_TIMEOUT_SECONDS = 120.0


def tour_blocks() -> list[str]:
    tour = README.read_text(encoding="utf-8").split("## A short tour", 1)[1]
    return re.findall(r"```bash\n(.*?)```", tour, flags=re.S)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = clean_env(CTXSVC_EVENTS_HEARTBEAT_SECONDS="0.2")
    cwd = tmp_path_factory.mktemp("readme")
    with running([serve_command(free_port())], env=env, cwd=cwd) as [server]:
        yield server


def run_block(block: str, server: ServerProcess) -> subprocess.CompletedProcess[str]:
    script = block.replace(README_ADDRESS, server.url)
    script = re.sub(r"^(curl -N \S+).*$", r"\1 | head -n 5", script, flags=re.M)
    return subprocess.run(
        ["bash", "-eu", "-c", script],
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_SECONDS,
        check=False,
    )


def documents(output: str) -> tuple[list[Any], str]:
    """The JSON documents curl printed back to back, and whatever text follows them."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    rest = output.lstrip()
    while rest.startswith(("{", "[")):
        value, end = decoder.raw_decode(rest)
        found.append(value)
        rest = rest[end:].lstrip()
    return found, rest


def test_the_tour_has_its_four_blocks() -> None:
    blocks = tour_blocks()
    assert len(blocks) == 4
    assert "/v1/prepare" in blocks[0]
    assert '"model_id": "local"' in blocks[1]
    assert '"kind": "scripted"' in blocks[2]
    assert "/tool-results" in blocks[2]
    assert "/pins" in blocks[3]


def test_the_stateless_prepare_answers_as_the_readme_says(server: ServerProcess) -> None:
    done = run_block(tour_blocks()[0], server)
    assert done.returncode == 0, done.stderr
    (answer,), _ = documents(done.stdout)
    # "the dangling ls call got a synthesized interrupted result"
    last = answer["request"]["messages"][-1]
    assert last["role"] == "tool"
    assert last["content"][0]["state"] == "interrupted"
    assert answer["budget"]["effective_input_tokens"] == 600  # 1000 − 400
    assert answer["provider_payload"]["messages"][0]["role"] == "system"


def test_a_whole_turn_offline_runs_as_the_readme_says(server: ServerProcess) -> None:
    done = run_block(tour_blocks()[1], server)
    assert done.returncode == 0, done.stderr
    (turn, refused, compaction, context), events = documents(done.stdout)
    assert turn["status"] == "completed"
    assert turn["outcome"]["final_text"].startswith("Local model: received your request")
    # Two short messages are smaller than their summary: refused, then installed on request.
    assert refused["code"] == "compaction_not_smaller"
    assert compaction["session_id"] == turn["session_id"]
    assert compaction["shrunk"] is False
    provenance = [entry["type"] for entry in context["provenance"]]
    assert "synthesized" in provenance  # the replay, summary and reminder after the compaction
    # The stream's greeting, then the session's first update.
    greeting, blank, first_id, first_event, *_ = events.splitlines()
    assert (greeting, blank, first_id) == (": connected", "", "id: 1")
    assert first_event.startswith("event: ")


def test_a_tool_round_trip_offline_runs_as_the_readme_says(server: ServerProcess) -> None:
    done = run_block(tour_blocks()[2], server)
    assert done.returncode == 0, done.stderr
    # The comment after the turn start shows what the snippet prints on stderr.
    assert done.stderr.strip() == (
        "waiting_tool_results [{'tool_call_id': 'call_ls', 'name': 'ls', "
        "'input': '{\"path\": \".\"}'}]"
    )
    (model, turn), rest = documents(done.stdout)
    assert rest == ""
    assert model["provider"]["kind"] == "scripted"
    assert turn["status"] == "completed"
    assert turn["outcome"] == {"final_text": "The project has a README.md and a src/ directory."}
    assert turn["model_calls"] == 2
    # The caller's tool output is in the Conversation, paired with the model's call.
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        stored = client.get(f"/v1/sessions/{turn['session_id']}/messages").json()["messages"]
    results = [b for m in stored for b in m["content"] if b["type"] == "tool_result"]
    assert [(r["id"], r["output"][0]["text"]) for r in results] == [("call_ls", "README.md\nsrc/")]


def test_the_tool_round_trip_can_be_run_again(server: ServerProcess) -> None:
    # PUT resets the scripted model's position: a reader who runs the block twice sees the same.
    for _ in range(2):
        done = run_block(tour_blocks()[2], server)
        assert done.returncode == 0, done.stderr
        (_, turn), _ = documents(done.stdout)
        assert turn["status"] == "completed", turn


def test_a_pin_reaches_the_request_as_the_readme_says(server: ServerProcess) -> None:
    done = run_block(tour_blocks()[3], server)
    assert done.returncode == 0, done.stderr
    (pin, prepared), rest = documents(done.stdout)
    assert rest == ""
    assert (pin["kind"], pin["position"]) == ("constraint", 1)
    last = prepared["request"]["messages"][-1]["content"][0]["text"]
    assert last.startswith('<pinned_context format_version="1">')
    assert "## Constraints\n- Never modify anything in the production database.\n" in last


def test_the_drop_in_example_runs_as_the_readme_says(server: ServerProcess) -> None:
    tour = README.read_text(encoding="utf-8").split("### Drop-in: the provider SDKs", 1)[1]
    (block,) = re.findall(r"```python\n(.*?)```", tour.split("\n### ", 1)[0], flags=re.S)
    script = block.replace(README_ADDRESS, server.url)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer, session_id = done.stdout.strip().splitlines()[-2:]
    assert answer.startswith("Local model")
    session = httpx.get(f"{server.url}/v1/sessions/{session_id}", timeout=30).json()
    assert session["origin"] == "proxy:openai_chat"
