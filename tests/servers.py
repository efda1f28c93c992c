"""Real server processes on loopback for tests that cross process boundaries.

A ``ServerProcess`` runs a command (``uvicorn app.main:app`` or the ``ctxsvc`` console script)
on a free 127.0.0.1 port with a clean ``CTXSVC_*`` environment, waits until it answers a
readiness path, and can be stopped (SIGTERM, graceful lifespan) or killed (SIGKILL, a crash) and
started again. Output goes to a log file (a pipe could fill up and block the server), which tests
read after stopping it. ``running(...)`` starts several and always stops them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

__all__ = [
    "CTXSVC_BIN",
    "REPO_ROOT",
    "ServerProcess",
    "clean_env",
    "free_port",
    "one_server",
    "running",
    "serve_command",
    "streaming_env",
    "streaming_server",
    "uvicorn_command",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
# The interpreter running the tests is the project's venv (scripts/test.sh); its console script
# sits beside it.
PYTHON = Path(sys.executable)
CTXSVC_BIN = PYTHON.parent / "ctxsvc"

# A deadline, not a wait: a healthy start takes seconds, but several interpreters importing the
# app at once on a loaded 2-core machine took more than 30 s (test_scale_out's 4 replicas).
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 10.0


def free_port() -> int:
    """A port that was free a moment ago (the server binds it right after; the race is tiny)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(**settings: str) -> dict[str, str]:
    """The test's environment without any ``CTXSVC_*`` variable, plus ``settings``: a developer's
    own ``CTXSVC_*`` variables must not leak into a server under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXSVC_", "_CTXSVC_"))}
    # The fake providers listen on loopback, which the service refuses by default
    # (``app.providers.destinations``); a test of that default sets "false".
    env["CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS"] = "true"
    env.update(settings)
    return env


def streaming_env(**settings: str) -> dict[str, str]:
    """``clean_env`` for a server whose event streams tests follow: text logs, a stream that
    re-reads the event log every 0.2 s and sends a heartbeat every second."""
    return clean_env(
        CTXSVC_JSON_LOGS="false",
        CTXSVC_EVENTS_POLL_SECONDS="0.2",
        CTXSVC_EVENTS_HEARTBEAT_SECONDS="1.0",
        **settings,
    )


def uvicorn_command(port: int) -> list[str]:
    app = ["-m", "uvicorn", "app.main:app", "--log-level", "warning"]
    return [str(PYTHON), *app, "--host", "127.0.0.1", "--port", str(port)]


def serve_command(port: int) -> list[str]:
    """README's first command (the console script)."""
    return [str(CTXSVC_BIN), "serve", "--port", str(port)]


class ServerProcess:
    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: Path = REPO_ROOT,
        log_path: Path | None = None,
        ready_path: str = "/readyz",
    ) -> None:
        self.command = list(command)
        self.port = int(self.command[self.command.index("--port") + 1])
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self.ready_path = ready_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        if self.log_path is None:
            return "(no log file)"
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def launch(self) -> ServerProcess:
        """Start the process without waiting (see ``wait_ready``)."""
        if self.log_path is None:
            output: int | None = subprocess.DEVNULL
            self.process = subprocess.Popen(
                self.command, env=self.env, cwd=self.cwd, stdout=output, stderr=output
            )
        else:
            with self.log_path.open("wb") as log:  # the child keeps its own descriptor
                self.process = subprocess.Popen(
                    self.command, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT
                )
        return self

    def wait_ready(self, client: httpx.Client, deadline: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.url} exited with {self.process.returncode}:\n{self.log()}"
                )
            try:
                if client.get(self.url + self.ready_path).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.url}{self.ready_path} not ready:\n{self.log()}")
            time.sleep(0.05)

    def start(self) -> ServerProcess:
        """Start and wait until ready (also to revive a stopped or killed server)."""
        self.launch()
        with httpx.Client(timeout=2.0) as client:
            self.wait_ready(client, time.monotonic() + START_TIMEOUT_SECONDS)
        return self

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)

    def stop(self) -> None:
        """SIGTERM: uvicorn shuts down gracefully (the lifespan ends)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def one_server(database_url: str, cwd: Path, **settings: str) -> Iterator[ServerProcess]:
    """One ``uvicorn`` process on an already migrated ``database_url`` with ``CTXSVC_*``
    ``settings`` (names without the prefix), its log in ``cwd``; stopped afterwards."""
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        **{f"CTXSVC_{name.upper()}": value for name, value in settings.items()},
    )
    process = ServerProcess(uvicorn_command(free_port()), env, cwd=cwd, log_path=cwd / "server.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def running(
    commands: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str],
    cwd: Path,
    ready_path: str = "/readyz",
    logs: bool = True,
) -> Iterator[list[ServerProcess]]:
    """Start every command (each with ``--port P``), wait until all are ready, stop them after."""
    with ExitStack() as stack:
        servers: list[ServerProcess] = []
        for index, command in enumerate(commands):
            log_path = cwd / f"server-{index}.log" if logs else None
            server = ServerProcess(command, env, cwd=cwd, log_path=log_path, ready_path=ready_path)
            stack.callback(server.stop)
            servers.append(server.launch())
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        with httpx.Client(timeout=2.0) as client:
            for server in servers:
                server.wait_ready(client, deadline)
        yield servers


@contextmanager
def streaming_server(cwd: Path, **settings: str) -> Iterator[ServerProcess]:
    """One ``uvicorn app.main:app`` with ``streaming_env(**settings)``, stopped afterwards."""
    env = streaming_env(**settings)
    with running([uvicorn_command(free_port())], env=env, cwd=cwd) as [server]:
        yield server
