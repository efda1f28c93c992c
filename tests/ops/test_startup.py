"""Starting the service as an operator does, with real processes: the database URL forms people
write, the one line a misconfiguration prints, and what ``ctxsvc migrate`` says it did.

A process that cannot start prints one ``ctxsvc: …`` line naming the variable, the value (never
a key or a password) and what is expected, exits non-zero, and prints neither a traceback nor
the Swagger UI banner.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.storage.migrate import alembic_config, head_revisions
from tests.api.helpers import session_body
from tests.conftest import throwaway_postgres_database
from tests.servers import CTXSVC_BIN, clean_env, free_port, running, serve_command, uvicorn_command

pytestmark = pytest.mark.slow

EXIT_TIMEOUT_SECONDS = 120.0
(HEAD,) = head_revisions()


def run(command: list[str], cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env=clean_env(**settings),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_SECONDS,
        check=False,
    )


def output_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return (done.stdout + done.stderr).splitlines()


def migrations() -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [r.revision for r in reversed(list(script.iterate_revisions("heads", "base")))]


def assert_refused(done: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    assert output_lines(done) == [line], done.stdout + done.stderr
    assert done.returncode == status


MISCONFIGURATIONS = [
    pytest.param(
        {"CTXSVC_WORKSPACE_ROOTS": "srv/work"},
        'CTXSVC_WORKSPACE_ROOTS must be a JSON list of absolute paths, like ["/srv/work"]; '
        "got 'srv/work' (it is not JSON)",
        id="roots-not-json",
    ),
    pytest.param(
        {"CTXSVC_WORKSPACE_ROOTS": '["/"]'},
        'CTXSVC_WORKSPACE_ROOTS must be a JSON list of absolute paths, like ["/srv/work"]; '
        "got '[\"/\"]' (workspace root '/' would expose the whole filesystem)",
        id="root-is-slash",
    ),
    pytest.param(
        {"CTXSVC_DATABASE_URL": "mysql://app:s3cret@db.internal/ctxsvc"},
        "CTXSVC_DATABASE_URL must be a database URL: sqlite:///path/to/ctxsvc.db or "
        "postgresql://user:password@host:5432/dbname; got 'mysql://app:***@db.internal/ctxsvc' "
        "(ctxsvc runs on SQLite or PostgreSQL, not mysql)",
        id="database-url",
    ),
    pytest.param(
        {"CTXSVC_TURN_LEASE_SECONDS": "0"},
        "CTXSVC_TURN_LEASE_SECONDS must be a number of seconds greater than 0; got '0'",
        id="number",
    ),
    pytest.param(
        {"CTXSVC_MIGRATE_ON_START": "sometimes"},
        "CTXSVC_MIGRATE_ON_START must be true or false; got 'sometimes'",
        id="switch",
    ),
    pytest.param(
        {"CTXSVC_ENVIRONMENT": "production"},
        "CTXSVC_ENVIRONMENT=production requires CTXSVC_API_KEYS: a JSON list of keys of 16 "
        "characters or more",
        id="production-without-keys",
    ),
    pytest.param(
        {"CTXSVC_API_KEYS": "s3cret-key-not-json"},
        'CTXSVC_API_KEYS must be a JSON list of keys, like ["a-long-random-key"]; got a value '
        "that is not shown (it holds keys): it is not JSON",
        id="keys-not-json",
    ),
]


@pytest.mark.parametrize(("settings", "line"), MISCONFIGURATIONS)
def test_a_misconfigured_serve_prints_one_line_and_exits(
    tmp_path: Path, settings: dict[str, str], line: str
) -> None:
    done = run(serve_command(free_port()), tmp_path, **settings)
    assert_refused(done, 2, f"ctxsvc: {line}")
    assert not (tmp_path / "data").exists()  # nothing was created either


@pytest.mark.parametrize(("settings", "line"), MISCONFIGURATIONS[:1] + MISCONFIGURATIONS[-1:])
def test_uvicorn_on_the_asgi_entry_says_the_same_line(
    tmp_path: Path, settings: dict[str, str], line: str
) -> None:
    done = run(uvicorn_command(free_port()), tmp_path, **settings)
    assert_refused(done, 2, f"ctxsvc: {line}")


def test_an_unreachable_database_is_one_line_before_the_banner(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://ctxsvc:s3cret@127.0.0.1:{port}/ctxsvc"
    done = run(serve_command(free_port()), tmp_path, CTXSVC_DATABASE_URL=url)
    (line,) = output_lines(done)
    assert line.startswith(
        "ctxsvc: cannot reach the database at CTXSVC_DATABASE_URL="
        f"postgresql+psycopg://ctxsvc:***@127.0.0.1:{port}/ctxsvc: connection failed: "
    ), line
    assert "Connection refused" in line
    assert "s3cret" not in line
    assert done.returncode == 1


def test_a_port_in_use_is_one_line_before_the_banner(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(serve_command(port), tmp_path)
    assert_refused(
        done,
        1,
        f"ctxsvc: cannot listen on 127.0.0.1:{port} (--host, --port): Address already in use",
    )


def test_migrate_says_what_it_did_then_that_there_is_nothing_to_do(tmp_path: Path) -> None:
    first = run([str(CTXSVC_BIN), "migrate"], tmp_path)
    assert first.returncode == 0, first.stderr
    where = "sqlite+aiosqlite:///./data/ctxsvc.db"
    summary, *applied = output_lines(first)
    assert summary == (
        f"ctxsvc: migrated the database at {where} from an empty schema to revision {HEAD} "
        f"({len(migrations())} migrations):"
    )
    assert [line.split(":")[1].split()[-1] for line in applied] == migrations()
    assert all(line.startswith("ctxsvc:   applied ") for line in applied)
    assert (tmp_path / "data" / "ctxsvc.db").is_file()

    again = run([str(CTXSVC_BIN), "migrate"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert output_lines(again) == [
        f"ctxsvc: the database at {where} is already at the latest schema (revision {HEAD}); "
        "nothing to do"
    ]


def test_a_misspelt_setting_is_named_before_the_service_runs_on_the_default(
    tmp_path: Path,
) -> None:
    # An operator meant PostgreSQL; the typo would otherwise leave the embedded SQLite running.
    done = run(
        [str(CTXSVC_BIN), "migrate"],
        tmp_path,
        CTXSVC_DATABSE_URL="postgresql://db/ctxsvc",
        CTXSVC_OPENAI_KEY="sk-not-a-setting",  # a model's api_key_env: no warning
    )
    assert done.returncode == 0, done.stderr
    first, *_ = output_lines(done)
    assert first == (
        "ctxsvc: warning: CTXSVC_DATABSE_URL is not a setting and is ignored; "
        "did you mean CTXSVC_DATABASE_URL?"
    )
    assert "CTXSVC_OPENAI_KEY" not in done.stdout + done.stderr


def test_the_openapi_document_does_not_depend_on_the_environment(tmp_path: Path) -> None:
    committed = (Path(__file__).parents[2] / "openapi" / "openapi.json").read_text("utf-8")
    done = run(
        [str(CTXSVC_BIN), "openapi", "--output", "spec.json"],
        tmp_path,
        CTXSVC_MAX_BODY_BYTES="lots",
        CTXSVC_API_KEYS='["k-7f3a9c1e5b2d4f60a8c1"]',
    )
    assert done.returncode == 0, done.stderr
    assert output_lines(done) == []
    assert (tmp_path / "spec.json").read_text("utf-8") == committed


def test_migrate_on_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    url = f"postgres://ctxsvc@127.0.0.1:{free_port()}/ctxsvc"
    done = run([str(CTXSVC_BIN), "migrate"], tmp_path, CTXSVC_DATABASE_URL=url)
    (line,) = output_lines(done)
    assert line.startswith("ctxsvc: cannot reach the database at CTXSVC_DATABASE_URL=")
    assert done.returncode == 1


def serves_the_api(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30.0) as client:
        assert client.get("/readyz").json() == {"status": "ready"}
        created = client.post("/v1/sessions", json=session_body())
        assert created.status_code == 201, created.text
        assert client.get(f"/v1/sessions/{created.json()['id']}").status_code == 200


def test_serve_takes_a_plain_sqlite_url_and_says_it_migrated(tmp_path: Path) -> None:
    env = clean_env(CTXSVC_DATABASE_URL="sqlite:///plain.db")
    with running([serve_command(free_port())], env=env, cwd=tmp_path) as [server]:
        serves_the_api(server.url)
    assert (tmp_path / "plain.db").is_file()
    lines = server.log().splitlines()
    assert lines[0].startswith(
        "ctxsvc: migrated the database at sqlite+aiosqlite:///plain.db from an empty schema"
    )
    banner = lines.index(f"ctxsvc: Swagger UI at http://127.0.0.1:{server.port}/docs")
    assert banner == 1 + len(migrations())  # the summary, each migration, then the banner


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    with throwaway_postgres_database() as url:
        yield url


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_serve_takes_the_postgres_urls_hosting_platforms_hand_out(
    tmp_path: Path, fresh_postgres: str, scheme: str
) -> None:
    url = make_url(fresh_postgres).set(drivername=scheme).render_as_string(hide_password=False)
    assert url.startswith(f"{scheme}://")
    env = clean_env(CTXSVC_DATABASE_URL=url)
    with running([serve_command(free_port())], env=env, cwd=tmp_path) as [server]:
        serves_the_api(server.url)
