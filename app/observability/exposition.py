"""The ``/metrics`` text, for one process or for every worker of a multiprocess server.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``ctxsvc serve --workers N`` sets it to a fresh directory
when it is not), every worker writes its values to files there and any worker's ``/metrics``
answers for all of them: counters and histograms summed, the pool gauge summed over live workers.
The standard process collector can only read the process it runs in, so in that mode each live
worker's figures (memory, CPU, open descriptors, start time) are read from ``/proc/<pid>`` and
labelled ``pid``; garbage-collector counters are counted by each worker (``Metrics``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from app.observability.metrics import Metrics, multiprocess_mode

__all__ = ["metrics_text"]

_PID_OF_FILE = re.compile(r"_(\d+)\.db$")


def metrics_text(metrics: Metrics) -> bytes:
    """The Prometheus text exposition of this app (or of all workers, in multiprocess mode)."""
    metrics.refresh_pool()
    metrics.publish_gc()
    directory = _multiprocess_directory()
    if directory is None:
        return generate_latest(metrics.registry)
    pids = _worker_pids(directory)
    for pid in pids - _live(pids):
        # A dead worker's "live" gauges (the pool) must not be summed with the living ones.
        multiprocess.mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]
    registry = CollectorRegistry()
    collector = multiprocess.MultiProcessCollector
    collector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    registry.register(_WorkerProcesses(directory))
    return generate_latest(registry)


def _multiprocess_directory() -> Path | None:
    if not multiprocess_mode():
        return None
    value = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(value) if value else None


def _worker_pids(directory: Path) -> set[int]:
    pids: set[int] = set()
    for name in os.listdir(directory):
        match = _PID_OF_FILE.search(name)
        if match is not None:
            pids.add(int(match.group(1)))
    return pids


def _live(pids: set[int]) -> set[int]:
    return {pid for pid in pids if os.path.exists(f"/proc/{pid}")}


def _constant(pid: int) -> Callable[[], int]:
    return lambda: pid


class _WorkerProcesses(Collector):
    """``process_*`` of every live worker, labelled with its ``pid``."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for pid in sorted(_live(_worker_pids(self._directory))):
            for family in ProcessCollector(pid=_constant(pid), registry=None).collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = Metric(family.name, family.documentation, family.type)
                    families[family.name] = merged
                for sample in family.samples:
                    merged.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
        return list(families.values())
