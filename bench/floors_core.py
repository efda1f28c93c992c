"""Core ``prepare()`` of a conversation the process has never seen ÷ LangChain's
``trim_messages`` of the same conversation: target ≤ 0.5×.

The cold case is the stateless endpoint's real case: every round decodes the conversation anew
from JSON (new string objects, as a request body gives), empties the salient-line memo
(``app/core/pipeline/salient.py``), and prepares with
nothing to carry on from (no earlier call: ``app/core/pipeline/one_pass/continuation.py``)
and no stored figures, with the service's estimate counter
(``app.fastjson.ESTIMATE``). Beside it, the same with the salient-line memo warm (what
the cold run of the round left in it). LangChain's trim is ``bench/prepare.py``'s (its
approximate counter, strategy ``last``), in the same rounds, alternating. Timed in CPU time of
this process (``time.process_time``), wall time beside it. ``pip install -e '.[bench]'``
brings LangChain.

Run: ``.venv/bin/python bench/floors_core.py [sizes...]`` (default 100 1000 10000)
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from app import fastjson
from app.core.content import Item
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart, ToolDefinition
from app.main import GC_THRESHOLDS
from app.services.salient_memo import SALIENT_LINES
from bench.fixtures import BENCH_CAPABILITIES, agent_conversation, system_context, tool_definitions
from bench.prepare import dumps, langchain_trim

TARGET = 0.5


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """CPU and wall seconds of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def prepare_once(
    system: list[SystemPart],
    tools: list[ToolDefinition],
    conversation: list[Item],
    watermark: PruningWatermark,
) -> Any:
    """As the stateless endpoint prepares: nothing remembered, no stored figures."""
    return prepare(
        system,
        conversation,
        tools,
        BENCH_CAPABILITIES,
        watermark,
        fastjson.ESTIMATE,
        remember=False,
        salient=SALIENT_LINES,  # the service's memo, as the endpoint passes it
    )


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1_000, 10_000]
    system, tools = system_context(), tool_definitions()
    gc.set_threshold(*GC_THRESHOLDS)  # the collector as a server process runs it (both sides)
    for n in sizes:
        items = agent_conversation(n)
        watermark = PruningWatermark(through_sequence=n // 2)
        trim = langchain_trim(system, items)
        if trim is None:
            raise SystemExit("pip install -e '.[bench]' (LangChain)")
        encoded = [dumps(i.content) for i in items]
        samples: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": [], "langchain": []}
        rounds = 21 if n <= 1_000 else 7
        for i in range(rounds + 1):
            for case in ("cold", "warm"):
                # New string objects, as a request body decodes them (nothing to carry on from).
                conversation = [
                    replace(m, content=json.loads(e)) for m, e in zip(items, encoded, strict=True)
                ]
                if case == "cold":
                    SALIENT_LINES.clear()  # "warm" keeps what the cold run just put in
                figures = timed(partial(prepare_once, system, tools, conversation, watermark))
                if i:  # the first round warms up the code paths
                    samples[case].append(figures)
            figures = timed(trim)
            if i:
                samples["langchain"].append(figures)
        cpu = {k: statistics.median(c for c, _ in v) for k, v in samples.items()}
        wall = {k: statistics.median(w for _, w in v) for k, v in samples.items()}
        ratio = cpu["cold"] / cpu["langchain"]
        print(
            f"{n:>6} msgs: never seen {cpu['cold'] * 1e3:8.2f} ms CPU (wall "
            f"{wall['cold'] * 1e3:.2f}); warm {cpu['warm'] * 1e3:8.2f} ms; LangChain trim "
            f"{cpu['langchain'] * 1e3:8.2f} ms (wall {wall['langchain'] * 1e3:.2f}); ratio never "
            f"seen ÷ LangChain {ratio:.2f}× CPU, {wall['cold'] / wall['langchain']:.2f}× wall "
            f"(target ≤ {TARGET}×: {'met' if ratio <= TARGET else 'MISSED'}); warm "
            f"{cpu['warm'] / cpu['langchain']:.2f}×"
        )


if __name__ == "__main__":
    main()
