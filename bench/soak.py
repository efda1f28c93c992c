"""Soak: two ``ctxsvc serve --workers 4`` processes on a private PostgreSQL that is restarted
twice while writers append, run turns against the loopback fake provider, compact and read.

Not a test: it prints what an operator would want to know after a bad night — requests, 5xx
answers by problem code, acknowledged writes that were lost (must be 0), p50/p99 latency — and
exits 1 when an acknowledged write is missing.

    .venv/bin/python -m bench.soak --minutes 5

The PostgreSQL instance is made with ``initdb`` in a temporary directory on a free port (run as
the ``postgres`` user when this runs as root) and removed afterwards; the shared server on 5432
is never touched. During a restart requests answer 503 ``database_unavailable`` (with
``Retry-After``) or fail to connect; both are counted, neither may lose an acknowledged write.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.providers.fake_wire import openai_stream
from tests.providers.fakes import FakeProviderServer, RecordedRequest, Reply, StreamReply
from tests.servers import CTXSVC_BIN, ServerProcess, clean_env, free_port

PROCESSES = 2
WORKERS = 4
KEY_ENV = "CTXSVC_SOAK_FAKE_KEY"
READY_DEADLINE_SECONDS = 180.0


# -- a private PostgreSQL ---------------------------------------------------------------------


def _as_postgres(command: Sequence[str]) -> list[str]:
    # initdb and postgres refuse to run as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


@dataclass
class PrivatePostgres:
    directory: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/soak"

    def _ctl(self, *args: str) -> None:
        data = str(self.directory / "data")
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        command = ["pg_ctl", "-D", data, "-o", options, "-l", str(self.directory / "log"), "-w"]
        subprocess.run(_as_postgres([*command, *args]), check=True, capture_output=True)

    def restart(self) -> None:
        self._ctl("-m", "fast", "restart")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    directory = Path(tempfile.mkdtemp(prefix="ctxsvc-soak-pg-"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    instance = PrivatePostgres(directory, free_port())
    initdb = ["initdb", "-D", str(directory / "data"), "-U", "postgres", "--auth=trust"]
    subprocess.run(_as_postgres(initdb), check=True, capture_output=True)
    instance._ctl("start")
    try:
        created = ["createdb", "-h", "127.0.0.1", "-p", str(instance.port), "-U", "postgres"]
        subprocess.run(_as_postgres([*created, "soak"]), check=True, capture_output=True)
        yield instance
    finally:
        with_stop = _as_postgres(["pg_ctl", "-D", str(directory / "data"), "-m", "immediate"])
        subprocess.run([*with_stop, "stop"], check=False, capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)


# -- the load ---------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    transport_errors: int = 0
    # Per session: the texts of appends the service acknowledged (201).
    acknowledged: dict[str, list[str]] = field(default_factory=dict)

    def record(self, answer: httpx.Response, seconds: float) -> None:
        self.latencies.append(seconds)
        self.statuses[answer.status_code] += 1
        if answer.status_code >= 400:
            try:
                code = str(answer.json().get("code"))
            except ValueError:
                code = "(not json)"
            target = self.server_errors if answer.status_code >= 500 else self.refusals
            target[f"{answer.status_code} {code}"] += 1


def _reply(_: RecordedRequest) -> Reply:
    return StreamReply(openai_stream(text=["soak answer"]))


async def _one(
    client: httpx.AsyncClient, tally: Tally, method: str, url: str, **kw: object
) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        answer = await client.request(method, url, **kw)  # type: ignore[arg-type]
    except httpx.TransportError:
        tally.transport_errors += 1
        return None
    tally.record(answer, time.perf_counter() - started)
    return answer


async def _writer(
    clients: list[httpx.AsyncClient], sessions: list[str], tally: Tally, until: float, seed: int
) -> None:
    rng = random.Random(seed)
    while time.monotonic() < until:
        client = rng.choice(clients)
        sid = rng.choice(sessions)
        op = rng.random()
        if op < 0.5:
            text = f"soak-{uuid.uuid4().hex}"
            body = {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
            answer = await _one(client, tally, "POST", f"/v1/sessions/{sid}/messages", json=body)
            if answer is not None and answer.status_code == 201:
                tally.acknowledged[sid].append(text)
        elif op < 0.75:
            await _one(client, tally, "GET", f"/v1/sessions/{sid}/messages", params={"limit": 50})
        elif op < 0.9:
            body = {
                "client_request_id": uuid.uuid4().hex,
                "input": [{"type": "text", "text": "go"}],
            }
            await _one(
                client,
                tally,
                "POST",
                f"/v1/sessions/{sid}/turns",
                params={"wait": "true"},
                json=body,
            )
        else:
            await _one(client, tally, "POST", f"/v1/sessions/{sid}/compactions", json={})


async def _stored_texts(client: httpx.AsyncClient, sid: str) -> set[str]:
    texts: set[str] = set()
    after = 0
    while True:
        page = await client.get(
            f"/v1/sessions/{sid}/messages", params={"after_sequence": after, "limit": 500}
        )
        page.raise_for_status()
        body = page.json()
        for message in body["messages"]:
            for block in message["content"]:
                if block.get("type") == "text":
                    texts.add(block["text"])
        if not body["has_more"]:
            return texts
        after = body["next_after_sequence"]


async def _soak(urls: list[str], postgres: PrivatePostgres, args: argparse.Namespace) -> int:
    tally = Tally()
    timeout = httpx.Timeout(60.0)
    async with (
        httpx.AsyncClient(base_url=urls[0], timeout=timeout) as first,
        httpx.AsyncClient(base_url=urls[1], timeout=timeout) as second,
    ):
        clients = [first, second]
        model_id = f"soak-{uuid.uuid4().hex[:8]}"
        model = {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "openai_chat",
                "base_url": args.provider_url + "/v1",
                "model_name": "soak-fake",
                "api_key_env": KEY_ENV,
            },
        }
        (await first.put(f"/v1/models/{model_id}", json=model)).raise_for_status()
        sessions: list[str] = []
        for _ in range(args.sessions):
            body = {
                "model_id": model_id,
                "summary_model_id": "local",
                "agent": {"system_prompt": "You are a soak test.", "tools": []},
            }
            created = await first.post("/v1/sessions", json=body)
            created.raise_for_status()
            sessions.append(created.json()["id"])
            tally.acknowledged[sessions[-1]] = []
        duration = args.minutes * 60
        until = time.monotonic() + duration
        writers = [
            asyncio.create_task(_writer(clients, sessions, tally, until, seed))
            for seed in range(args.writers)
        ]
        for index in range(args.restarts):
            # Evenly spread over the run: at 1/3 and 2/3 of it with the default two.
            moment = duration * (index + 1) / (args.restarts + 1)
            await asyncio.sleep(max(0.0, until - duration + moment - time.monotonic()))
            print(f"restarting PostgreSQL ({index + 1} of {args.restarts})", flush=True)
            await asyncio.to_thread(postgres.restart)
        await asyncio.gather(*writers)
        # Give the pools a moment to notice the last restart, then check every ack.
        lost = 0
        for sid in sessions:
            for attempt in range(60):
                try:
                    stored = await _stored_texts(first, sid)
                    break
                except httpx.HTTPError:
                    if attempt == 59:
                        raise
                    await asyncio.sleep(1.0)
            lost += sum(1 for text in tally.acknowledged[sid] if text not in stored)
    _report(tally, lost)
    return 1 if lost else 0


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def _report(tally: Tally, lost: int) -> None:
    total = sum(tally.statuses.values())
    print(f"requests answered: {total} (+ {tally.transport_errors} without an answer)")
    print("by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items())))
    print(
        "5xx by code: " + (", ".join(f"{c}: {n}" for c, n in tally.server_errors.items()) or "none")
    )
    print("4xx by code: " + (", ".join(f"{c}: {n}" for c, n in tally.refusals.items()) or "none"))
    acknowledged = sum(len(t) for t in tally.acknowledged.values())
    print(f"acknowledged appends: {acknowledged}; lost: {lost}")
    p50 = _percentile(tally.latencies, 0.5) * 1000
    p99 = _percentile(tally.latencies, 0.99) * 1000
    print(f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        postgres = stack.enter_context(private_postgres())
        provider = stack.enter_context(FakeProviderServer(responder=_reply))
        args.provider_url = provider.base_url
        env = clean_env(CTXSVC_DATABASE_URL=postgres.url, **{KEY_ENV: "sk-soak"})
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        subprocess.run([str(CTXSVC_BIN), "migrate"], env=env, check=True)
        logs = Path(tempfile.mkdtemp(prefix="ctxsvc-soak-logs-"))
        servers: list[ServerProcess] = []
        for index in range(PROCESSES):
            command = [str(CTXSVC_BIN), "serve", "--port", str(free_port())]
            command += ["--workers", str(WORKERS)]
            server = ServerProcess(
                command,
                {**env, "CTXSVC_MIGRATE_ON_START": "false"},
                cwd=logs,
                log_path=logs / f"server-{index}.log",
            )
            stack.callback(server.stop)
            servers.append(server.launch())
        with httpx.Client(timeout=5.0) as probe:
            for server in servers:
                server.wait_ready(probe, time.monotonic() + READY_DEADLINE_SECONDS)
        print(f"{PROCESSES} processes x {WORKERS} workers ready; logs in {logs}", flush=True)
        return asyncio.run(_soak([s.url for s in servers], postgres, args))


if __name__ == "__main__":
    sys.exit(main())
