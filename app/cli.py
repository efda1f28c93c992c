"""``ctxsvc`` command: ``serve`` (default), ``migrate``, ``openapi``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main", "openapi_document"]


def openapi_document() -> str:
    """The OpenAPI document of the app built from default settings, as committed."""
    from app.main import create_app
    from app.settings import Settings

    spec = create_app(Settings(migrate_on_start=False)).openapi()
    return json.dumps(spec, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ctxsvc", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the HTTP service (migrates the database first)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    sub.add_parser("migrate", help="migrate the configured database to the latest schema")
    spec = sub.add_parser("openapi", help="write the OpenAPI document")
    spec.add_argument("--output", type=Path, default=Path("openapi/openapi.json"))
    args = parser.parse_args(argv)

    if args.command == "openapi":
        args.output.write_text(openapi_document(), encoding="utf-8")
        return 0
    if args.command == "migrate":
        import asyncio

        from app.settings import Settings
        from app.storage.migrate import upgrade_to_head

        asyncio.run(upgrade_to_head(Settings().database_url))
        return 0
    import uvicorn

    host = getattr(args, "host", "127.0.0.1")
    port = getattr(args, "port", 8000)
    workers = getattr(args, "workers", 1)
    print(f"ctxsvc: Swagger UI at http://{host}:{port}/docs", file=sys.stderr)
    uvicorn.run("app.main:app", host=host, port=port, workers=workers, log_config=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
