"""Compaction benchmark: the non-model part of a compaction and the pruning-only path.

For sessions of 1 000 and 10 000 stored messages (SQLite, the ``local`` summary model, which
answers in well under a millisecond, so the wall time is the service's own work): the phases
of one manual compaction (prepare = read + runtime state + the two budget prepares, summary,
persistence, install), the tokens reclaimed, and the pruning-only path (advance the watermark)
against one prepare (context inspection) of the same session, all measured in one run.

Run: ``.venv/bin/python bench/compaction.py``
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from app.api.render.compactions import checkpoint_json
from app.api.render.prepare import inspection_json
from app.api.schemas.sessions import SessionCreate
from app.container import Container
from app.core.capabilities import ModelCapabilities
from app.services.model_types import ProviderSpec
from app.settings import Settings
from app.storage.migrate import upgrade_to_head

BIG = "x" * 9000  # over the 8 192-character pruning line


def batch(start: int, count: int) -> list[tuple[str, str, list[Any]]]:
    """user, assistant(tool call), tool result, assistant text — repeated."""
    out: list[tuple[str, str, list[Any]]] = []
    i = start
    while len(out) < count:
        call = f"call-{i}"
        output = BIG if i % 10 == 0 else f"result {i} " * 20
        out.append(("user", "normal", [{"type": "text", "text": f"request {i}: do step {i}"}]))
        out.append(
            (
                "assistant",
                "normal",
                [{"type": "tool_call", "id": call, "name": "read", "input": "{}"}],
            )
        )
        out.append(
            (
                "tool",
                "normal",
                [
                    {
                        "type": "tool_result",
                        "id": call,
                        "name": "read",
                        "output": [{"type": "text", "text": output}],
                        "state": "success",
                    }
                ],
            )
        )
        out.append(("assistant", "normal", [{"type": "text", "text": f"step {i} done"}]))
        i += 1
    return out[:count]


async def build_session(container: Container, messages: int) -> str:
    # The built-in ``local`` model has a 32k window; 10 000 messages need a larger one.
    await container.models.put(
        "default", "bench-local", ModelCapabilities(4_000_000, 16_384), ProviderSpec(kind="local")
    )
    spec = {
        "model_id": "bench-local",
        "agent": {"system_prompt": "You are a careful agent.", "tools": [], "preset": "coding"},
        "sandbox": {"mode": "auto", "available": True},
    }
    sid = (await container.sessions.create(SessionCreate.model_validate(spec), "default")).id
    done = 0
    while done < messages:
        chunk = batch(done, min(1000, messages - done))
        await container.messages.append(sid, chunk)
        done += len(chunk)
    return sid


async def timed(coro: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await coro
    return result, (time.perf_counter() - started) * 1000


async def _inspect(container: Container, sid: str) -> dict[str, Any]:
    """``GET .../context`` without HTTP: the inspection and its JSON."""
    return inspection_json(await container.inspection.inspection(sid), encode_as=None)


async def run(size: int, directory: Path) -> None:
    url = f"sqlite+aiosqlite:///{directory}/bench-{size}.db"
    await upgrade_to_head(url)
    container = Container.build(Settings(database_url=url, migrate_on_start=False))
    try:
        sid = await build_session(container, size)
        inspections = []
        for _ in range(3):
            _, ms = await timed(_inspect(container, sid))
            inspections.append(ms)
        moved, prune_ms = await timed(container.compactor.prune(sid))
        row, total_ms = await timed(container.compactor.compact(sid))
        checkpoint = checkpoint_json(row)  # the figures as the API answers them
        timings = checkpoint["timings"]
        print(
            f"{size:>6} messages | one prepare (inspection, median of 3) "
            f"{statistics.median(inspections):8.1f} ms"
            f" | pruning only {prune_ms:8.1f} ms (moved={moved})"
        )
        print(
            f"{'':>6}          | manual compaction {total_ms:8.1f} ms wall: "
            f"prepare {timings['prepare_ms']} ms,"
            f" summary {timings['summary_ms']} ms, persistence {timings['persistence_ms']} ms,"
            f" install {timings['install_ms']} ms"
        )
        print(
            f"{'':>6}          | conversation tokens {checkpoint['conversation_tokens_before']}"
            f" → {checkpoint['conversation_tokens_after']}"
            f" (reclaimed {checkpoint['reclaimed_conversation_tokens']})"
        )
    finally:
        await container.aclose()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for size in (1_000, 10_000):
            await run(size, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
