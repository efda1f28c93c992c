"""``ctxsvc`` command: ``serve`` (default), ``migrate``, ``openapi``.

Whatever keeps the service from starting — a bad setting, a database it cannot reach or
migrate, a port it cannot listen on — is said in one line on stderr (``ctxsvc: …``) before the
Swagger UI banner, and the command exits non-zero without a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from alembic.util.exc import CommandError
from sqlalchemy.exc import SQLAlchemyError

from app.settings import Settings, default_settings, settings_or_exit
from app.storage.migrate import MigrationReport, upgrade_to_head
from app.storage.urls import redacted_url

__all__ = ["main", "openapi_document"]

# Exit statuses: 2 for settings (as argparse does for bad arguments), 1 for everything else.
EXIT_UNAVAILABLE = 1


def say(line: str) -> None:
    print(f"ctxsvc: {line}", file=sys.stderr)


def openapi_document() -> str:
    """The OpenAPI document of the app built from default settings, as committed."""
    from app.main import create_app

    spec = create_app(default_settings(migrate_on_start=False)).openapi()
    return json.dumps(spec, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


HELP = "Prepare the input of every LLM call an agent makes, over HTTP."
EPILOG = """Settings come from CTXSVC_* environment variables (or a .env file):
see docs/configuration.md. Whatever keeps the service from starting is said in one
line on stderr, and the command exits non-zero: 2 for a bad setting or argument,
1 for anything else."""


def port_number(text: str) -> int:
    """``--port``: a TCP port, 0-65535 (0 lets the system choose)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def worker_count(text: str) -> int:
    """``--workers``: at least one process."""
    try:
        workers = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if workers < 1:
        raise argparse.ArgumentTypeError(f"{workers}: at least 1 worker is needed")
    return workers


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake said in one ``ctxsvc: …`` line like every start-up error."""

    def error(self, message: str) -> NoReturn:
        say(f"{message} (see {self.prog} --help)")
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    root = _Parser(
        prog="ctxsvc",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = root.add_subparsers(dest="command", title="commands", metavar="{serve,migrate,openapi}")
    serve = sub.add_parser(
        "serve",
        help="run the HTTP service, the default (migrates the database first)",
        description="Run the HTTP service; it migrates the database first unless "
        "CTXSVC_MIGRATE_ON_START=false.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port",
        type=port_number,
        default=8000,
        help="TCP port to listen on (default: %(default)s)",
    )
    serve.add_argument(
        "--workers",
        type=worker_count,
        default=1,
        help="server processes sharing the port (default: %(default)s)",
    )
    sub.add_parser(
        "migrate",
        help="migrate the configured database to the latest schema",
        description="Migrate the database at CTXSVC_DATABASE_URL to the latest schema, then exit.",
    )
    spec = sub.add_parser(
        "openapi",
        help="write the OpenAPI document",
        description="Write the OpenAPI document of this version (built from default settings).",
    )
    spec.add_argument(
        "--output",
        type=Path,
        default=Path("openapi/openapi.json"),
        help="file to write (default: %(default)s)",
    )
    return root


def main(argv: list[str] | None = None) -> int:
    parser_ = parser()
    args = parser_.parse_args(argv)

    if args.command == "openapi":
        args.output.write_text(openapi_document(), encoding="utf-8")
        return 0
    settings = settings_or_exit()
    if args.command == "migrate":
        report = migrate(settings)
        if report is None:
            return EXIT_UNAVAILABLE
        for line in describe_migration(settings.database_url, report):
            say(line)
        return 0
    return run_server(
        settings,
        host=getattr(args, "host", "127.0.0.1"),
        port=getattr(args, "port", 8000),
        workers=getattr(args, "workers", 1),
    )


def run_server(settings: Settings, *, host: str, port: int, workers: int) -> int:
    import uvicorn

    from app.api.http_protocol import BoundedHttpProtocol

    problem = listen_problem(host, port)  # first: a server that cannot listen changes nothing
    if problem is not None:
        say(problem)
        return EXIT_UNAVAILABLE
    if settings.migrate_on_start:
        # Here rather than in each worker's start-up: a failure is one line, before the banner.
        report = migrate(settings)
        if report is None:
            return EXIT_UNAVAILABLE
        for line in describe_migration(settings.database_url, report) if report.applied else ():
            say(line)
        # The workers (this process's children) find it done and need not repeat it.
        os.environ["CTXSVC_MIGRATE_ON_START"] = "false"
    say(f"Swagger UI at http://{host}:{port}/docs")
    with metrics_directory(workers):
        uvicorn.run(
            "app.main:app",
            host=host,
            port=port,
            workers=workers,
            log_config=None,
            # A bounded request head and problem+json refusals (``app.api.http_protocol``).
            # The class itself, which every uvicorn takes (not every one takes an import string).
            http=BoundedHttpProtocol,
            h11_max_incomplete_event_size=settings.max_header_bytes,
        )
    return 0


def migrate(settings: Settings) -> MigrationReport | None:
    """Migrate the configured database; ``None`` after saying, in one line, why it failed."""
    where = redacted_url(settings.database_url)
    try:
        return asyncio.run(upgrade_to_head(settings.database_url))
    except CommandError as exc:  # e.g. a schema revision this version does not know
        say(f"cannot migrate the database at CTXSVC_DATABASE_URL={where}: {_one_line(exc)}")
    except (SQLAlchemyError, OSError) as exc:
        cause = getattr(exc, "orig", None) or exc  # the driver's own words, not SQLAlchemy's
        say(f"cannot reach the database at CTXSVC_DATABASE_URL={where}: {_one_line(cause)}")
    return None


def describe_migration(url: str, report: MigrationReport) -> list[str]:
    """A summary line, then one line per migration applied."""
    where = redacted_url(url)
    head = "revision " + ", ".join(sorted(report.after))
    if not report.applied:
        return [f"the database at {where} is already at the latest schema ({head}); nothing to do"]
    start = "revision " + ", ".join(sorted(report.before)) if report.before else "an empty schema"
    count = len(report.applied)
    plural = "migration" if count == 1 else "migrations"
    summary = f"migrated the database at {where} from {start} to {head} ({count} {plural}):"
    return [summary, *(f"  applied {m.revision}: {m.doc}" for m in report.applied)]


def listen_problem(host: str, port: int) -> str | None:
    """Why uvicorn could not listen on ``host:port`` (checked as it binds: ``SO_REUSEADDR``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port} (--host, --port): {exc.strerror or exc}"
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def metrics_directory(workers: int) -> Iterator[None]:
    """Several workers share their metrics through files (prometheus-client's multiprocess
    mode): in ``PROMETHEUS_MULTIPROC_DIR`` when it is set (its value files are cleared first,
    as the client requires), otherwise in a fresh directory removed at exit. One worker needs
    none (unless the variable asks for it)."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if configured:
        directory = Path(configured)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield
        return
    if workers <= 1:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="ctxsvc-metrics-") as created:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = created
        try:
            yield
        finally:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]


if __name__ == "__main__":
    raise SystemExit(main())
