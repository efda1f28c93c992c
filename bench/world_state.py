"""World State sampling cost: capture + render + diff for a large workspace.

Builds a temporary workspace of 10 000 top-level entries (9 000 files, 1 000 directories), an
AGENTS.md and 100 skills, then times each phase over several repetitions and prints the median.
Also prints, from the same run, one prepare of a 1 000-message session (core and through the
service) and the ratio. Run: ``.venv/bin/python bench/world_state.py [repetitions]`` (or ``-m
bench.world_state``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.content import Item, text_block
from app.core.pipeline.prepare import prepare
from app.core.world_state import (
    SandboxSettings,
    advance_baselines,
    diff_sections,
    render_sections,
    world_state_item,
)
from app.workspace import capture_filesystem
from bench.fixtures import BENCH_CAPABILITIES, agent_conversation, system_context, tool_definitions
from bench.store import timed
from bench.store_setup import client_of, fill, register_model_and_session, sqlite_database


def build(root: Path) -> tuple[Path, Path]:
    work = root / "repo"
    work.mkdir()
    (work / ".git").mkdir()
    for i in range(9_000):
        os.close(os.open(work / f"file-{i:05d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    for i in range(1_000):
        (work / f"dir-{i:04d}").mkdir()
    (work / "AGENTS.md").write_text("# Rules\n" + "Keep changes small.\n" * 200)
    skills = root / "skills"
    skills.mkdir()
    for i in range(100):
        directory = skills / f"skill-{i:03d}"
        directory.mkdir()
        (directory / "SKILL.md").write_text(
            f"---\nname: skill-{i:03d}\ndescription: >\n  Does task {i} when the user asks for it,"
            f" with care.\n---\n\n# Skill {i}\n" + "Step.\n" * 100
        )
    return work, skills


def main() -> None:
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    sandbox = SandboxSettings("auto", True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        work, skills = build(root)
        conversation: list[Item] = [Item("user", "normal", [text_block("hello")])]
        baselines: dict[str, str | None] = {}
        timings: dict[str, list[float]] = {"capture": [], "render": [], "diff": [], "total": []}
        for _ in range(repetitions):
            t0 = time.perf_counter()
            inputs = capture_filesystem(
                str(work), allowed_roots=[str(root)], skills_root=str(skills)
            )
            t1 = time.perf_counter()
            rendered = render_sections(inputs, sandbox)
            t2 = time.perf_counter()
            messages = diff_sections(rendered, baselines, conversation)
            t3 = time.perf_counter()
            conversation.extend(world_state_item(m.text) for m in messages)
            baselines = advance_baselines(baselines, messages)
            for name, value in (("capture", t1 - t0), ("render", t2 - t1), ("diff", t3 - t2)):
                timings[name].append(value)
            timings["total"].append(t3 - t0)
        print(
            f"world state: {len(inputs.layout)} entries, {len(inputs.skills)} skills, "
            f"{len(conversation)} conversation items, {repetitions} repetitions"
        )
        for name, values in timings.items():
            print(f"  {name:<8} median {statistics.median(values) * 1000:8.2f} ms")
    sampling = statistics.median(timings["total"])
    core, service = asyncio.run(prepare_of_a_1000_message_session())
    print("one prepare of a 1 000-message session, same run (the target: sampling well under it)")
    print(
        f"  core prepare()            median {core * 1000:8.2f} ms  sampling/prepare "
        f"{sampling / core:.2f}"
    )
    print(
        f"  service (GET /context)    median {service * 1000:8.2f} ms  sampling/prepare "
        f"{sampling / service:.2f}"
    )


async def prepare_of_a_1000_message_session() -> tuple[float, float]:
    """Median times of the core ``prepare()`` (counting from scratch) and of the service's
    inspection of the same 1 000 messages stored in SQLite (load, count, prepare, respond)."""
    items = agent_conversation(1_000)
    core = []
    for _ in range(10):
        started = time.perf_counter()
        prepare(system_context(), items, tool_definitions(), BENCH_CAPABILITIES)
        core.append(time.perf_counter() - started)
    async with sqlite_database() as url, client_of(url) as client:
        session_id = await register_model_and_session(client)
        await fill(client, session_id, items, 500)
        service = await timed(lambda: client.get(f"/v1/sessions/{session_id}/context"), 10)
    return statistics.median(core), statistics.median(service)


if __name__ == "__main__":
    main()
