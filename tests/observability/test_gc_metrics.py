"""The garbage collector's figures in multiprocess mode: its callback only counts into plain
integers, ordinary code publishes them (a metric written from a GC callback deadlocked a worker
that was collected inside prometheus-client's own lock)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client import generate_latest

from app.observability import Metrics
from tests.ops.test_observability import samples, value


def test_the_gc_callback_runs_no_prometheus_code() -> None:
    metrics = Metrics()
    metrics._count_gc_collections()  # what multiprocess mode installs
    try:
        callback = metrics._gc_callback
        assert callback is not None
        assert callback in gc.callbacks
        entered: list[str] = []

        def profile(frame: FrameType, event: str, _: Any) -> None:
            if event in {"call", "c_call"}:
                entered.append(frame.f_code.co_filename)

        sys.setprofile(profile)
        try:
            callback("stop", {"generation": 1, "collected": 5, "uncollectable": 0})
        finally:
            sys.setprofile(None)
        assert not [name for name in entered if "prometheus_client" in name], entered
        # ... and what it counted reaches the counters once published, and only once.
        metrics.publish_gc()
        metrics.publish_gc()
        found = samples(generate_latest(metrics.registry).decode())
        assert value(found, "python_gc_collections_total", generation="1") >= 1
        assert value(found, "python_gc_objects_collected_total", generation="1") >= 5
    finally:
        metrics.close()
    assert callback not in gc.callbacks


def test_collections_inside_metric_writes_never_deadlock_a_worker(tmp_path: Path) -> None:
    """A collection after nearly every allocation, while thousands of labelled values are made
    and written in multiprocess mode: the process must finish (on the old hook it hung)."""
    script = textwrap.dedent(
        """
        import gc
        from app.observability import Metrics
        from app.observability.metrics import multiprocess_mode
        assert multiprocess_mode()
        metrics = Metrics()
        gc.set_threshold(1, 1, 1)
        for i in range(3000):
            metrics.requests.labels("GET", f"/r{i % 300}", "200").inc()
            metrics.latency.labels("GET", f"/r{i % 300}").observe(0.01)
            if i % 100 == 0:
                metrics.publish_gc()
        gc.set_threshold(700, 10, 10)
        metrics.publish_gc()
        print("done")
        """
    )
    directory = tmp_path / "prom"
    directory.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(directory), "PATH": "/usr/bin:/bin"}
    finished = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=180,  # generous: a deadlock never ends, a healthy run takes seconds
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert finished.stdout.strip() == "done"
