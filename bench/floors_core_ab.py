"""The cold core ``prepare()`` of ``bench/floors_core.py``, this checkout against another, in one
process, alternating round by round (which goes first alternates too).

On a shared, loaded machine two processes run minutes apart see different neighbours: their
medians move by more than a few per cent of change. Here both checkouts' modules are loaded side
by side (each its own ``app`` package, imported in turn under the same names), each round
prepares the same conversation, decoded anew, with one and then the other, and the outputs are
compared (request, measures, budget, report): the figures are of the same work.

Run: ``.venv/bin/python bench/floors_core_ab.py /work/wt/integ 1000 10000 [--rounds 60]``
(the other checkout must be importable by this interpreter: the same dependencies).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = str(Path(__file__).resolve().parents[1])


def _load(tree: str) -> dict[str, ModuleType]:
    """The bench's modules of checkout ``tree``, imported afresh (its own ``app``)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("app", "bench")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        modules = {
            "core": importlib.import_module("bench.floors_core"),
            "fixtures": importlib.import_module("bench.fixtures"),
            "calls": importlib.import_module("app.core.pipeline.prepared_call"),
            "memo": importlib.import_module("app.services.salient_memo"),
            "main": importlib.import_module("app.main"),
        }
    finally:
        sys.path.remove(tree)
    source = modules["core"].__file__
    if source is None or not source.startswith(tree):
        raise SystemExit(f"{tree}: its bench was not the one imported ({source})")
    return modules


def _output(prepared: Any) -> tuple[str, list[int], str, str]:
    request = json.dumps(prepared.request, sort_keys=True, ensure_ascii=False)
    return request, list(prepared.measures), repr(prepared.budget), repr(prepared.projection)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("other", help="the other checkout (old)")
    parser.add_argument("sizes", nargs="*", type=int, default=[1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=0, help="per side (default 60 / 16)")
    args = parser.parse_args()
    sides = {"old": _load(str(Path(args.other).resolve())), "new": _load(HERE)}
    gc.set_threshold(*sides["new"]["main"].GC_THRESHOLDS)
    for n in args.sizes:
        rounds = args.rounds or (60 if n <= 1_000 else 16)
        state = {}
        for side, m in sides.items():
            items = m["fixtures"].agent_conversation(n)
            encoded = [m["core"].dumps(i.content) for i in items]
            watermark = m["calls"].PruningWatermark(through_sequence=n // 2)
            state[side] = (m, items, encoded, watermark)
        samples: dict[str, list[float]] = {"old": [], "new": []}
        outputs: dict[str, tuple[str, list[int], str, str]] = {}
        for i in range(rounds + 1):  # the first round warms up the code paths
            for side in ("old", "new") if i % 2 else ("new", "old"):
                m, items, encoded, watermark = state[side]
                conversation = [
                    replace(item, content=json.loads(e))
                    for item, e in zip(items, encoded, strict=True)
                ]
                m["memo"].SALIENT_LINES.clear()
                system, tools = m["fixtures"].system_context(), m["fixtures"].tool_definitions()
                cpu = time.process_time()
                prepared = m["core"].prepare_once(system, tools, conversation, watermark)
                cpu = time.process_time() - cpu
                if i:
                    samples[side].append(cpu)
                outputs[side] = _output(prepared)
        if outputs["old"] != outputs["new"]:
            raise SystemExit(f"{n} msgs: the two checkouts' outputs differ")
        old, new = (statistics.median(samples[s]) for s in ("old", "new"))
        print(
            f"{n:>6} msgs, {rounds} rounds a side: old {old * 1e3:.2f} ms CPU (min "
            f"{min(samples['old']) * 1e3:.2f}), new {new * 1e3:.2f} ms (min "
            f"{min(samples['new']) * 1e3:.2f}); new ÷ old {new / old:.3f} (of the minima "
            f"{min(samples['new']) / min(samples['old']):.3f}); the same output"
        )


if __name__ == "__main__":
    main()
