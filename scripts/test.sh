#!/usr/bin/env bash
# Sets up everything on a fresh machine (venv, chromium for the page tests, PostgreSQL) and runs
# the full test suite (lint, types, tests).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
# Page tests drive Debian's chromium (Playwright never downloads a browser). Installed here when
# we may (root with apt, as on CI); elsewhere the page tests say how to get it.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null
fi
CTXSVC_TEST_POSTGRES_URL=$(bash scripts/ensure-postgres.sh)
export CTXSVC_TEST_POSTGRES_URL
.venv/bin/ruff check app tests bench scripts clients
.venv/bin/ruff format --check app tests bench scripts clients
.venv/bin/mypy
# Two workers at most (one per core on CI; each opens its own PostgreSQL database and pools, so
# many more would crowd the server's connections); `-n 0` after the command runs in one process.
.venv/bin/python -m pytest -n auto --maxprocesses 2 "$@"
