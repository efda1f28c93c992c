#!/usr/bin/env bash
# Sets up everything on a fresh machine and runs the full test suite (lint, types, tests).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
CTXSVC_TEST_POSTGRES_URL=$(bash scripts/ensure-postgres.sh)
export CTXSVC_TEST_POSTGRES_URL
.venv/bin/ruff check app tests bench scripts
.venv/bin/ruff format --check app tests bench scripts
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
