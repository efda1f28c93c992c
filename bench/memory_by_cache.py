"""What one stored session costs the process, in process memory, cache by cache.

    .venv/bin/python bench/memory_by_cache.py [--messages 10000] [--pruned 0.5]

A session of ``--messages`` messages as the service holds it after a model call, built in
process and measured with ``tracemalloc`` (bytes Python allocated, not RSS: the allocator's
slack comes on top):

- ``read``: the stored rows, decoded from their JSON as a read decodes them, and their items
  (``CountedConversation``, what the session context keeps as its last committed read);
- ``last call``: the call prepared from it (``PreparedModelCall``: the request's messages, the
  measures, the walk, the prefix record and its basis), the first ``--pruned`` of the messages
  pruned, as after the service's pruning; salient lines it found are not counted here;
- ``salient memo``: what the cut results left in ``SALIENT_LINES``;
- ``message memo``: each message's JSON for the OpenAI Chat body (``memos.OwnedMemo``, the
  session context's).

Printed: each part in MB and as a multiple of the session's stored JSON (the bytes the
conversation cache's bound counts), and the estimate ``session_context.process_bytes`` makes of
the whole context from the JSON alone.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datetime import UTC, datetime

from app import fastjson
from app.core.content import Item
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from app.providers.encoding import wire
from app.services.conversation import ActiveConversation
from app.services.request_prefix import prefixed_extending
from app.services.salient_memo import SALIENT_LINES
from app.services.tokens import CountedConversation
from app.storage.repositories.records import StoredMessage
from bench.fixtures import BENCH_CAPABILITIES, agent_conversation, system_context, tool_definitions

MB = 1_000_000


def _now() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def stored_read(source: list[Item]) -> tuple[CountedConversation, int]:
    """``source`` as a read of the stored session holds it (rows decoded from their JSON,
    then their items), and the bytes of that JSON."""
    rows: list[StoredMessage] = []
    json_bytes = 0
    now = datetime.now(UTC)
    for item in source:
        stored = fastjson.dumps(item.content)
        json_bytes += len(stored)
        sequence = getattr(item.origin, "sequence", len(rows) + 1)
        rows.append(
            StoredMessage(
                "s",
                sequence,
                f"msg-{sequence:06d}",
                item.role,
                item.kind,
                fastjson.loads(stored),
                None,
                None,
                None,
                None,
                len(stored),
                {},
                now,
            )
        )
    items = [row.to_item() for row in rows]
    return CountedConversation(ActiveConversation(items, None, rows)), json_bytes


def measure(messages: int, pruned: float) -> dict[str, int]:
    source = agent_conversation(messages)
    tracemalloc.start()
    start = _now()
    counted, json_bytes = stored_read(source)
    del source
    read = _now()
    items = counted.items
    through = items[int(len(items) * pruned)].origin
    watermark = PruningWatermark(getattr(through, "sequence", None), None)
    prepared = prepare(
        system_context(),
        list(items),
        tool_definitions(),
        BENCH_CAPABILITIES,
        watermark,
        salient=SALIENT_LINES,
    )
    prepared, basis = prefixed_extending(prepared, list(items), None, None, identify_stored=True)
    with_salient = _now()
    SALIENT_LINES.clear()
    called = _now()
    memo = wire.OwnedMemo()
    wire.owned_by(memo)
    wire.openai_chat_body(prepared.request, model="m", stream=True)
    encoded = _now()
    wire.owned_by(None)
    tracemalloc.stop()
    assert counted is not None
    assert basis is not None
    return {
        "json": json_bytes,
        "read": read - start,
        "last call": called - read,
        "salient memo": with_salient - called,
        "message memo": encoded - called,
        "memo held": memo.held_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--pruned", type=float, default=0.5)
    args = parser.parse_args()
    figures = measure(args.messages, args.pruned)
    json_bytes = figures.pop("json")
    held = figures.pop("memo held")
    print(f"{args.messages} messages, {json_bytes / MB:.1f} MB of stored JSON")
    total = 0
    for name, size in figures.items():
        total += size
        print(f"  {name:<14} {size / MB:7.1f} MB  {size / json_bytes:5.2f}× the JSON")
    print(f"  {'all':<14} {total / MB:7.1f} MB  {total / json_bytes:5.2f}× the JSON")
    print(f"  the message memo's own count: {held / MB:.1f} MB of JSON")


if __name__ == "__main__":
    main()
