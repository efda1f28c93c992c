#!/usr/bin/env bash
# Makes sure a PostgreSQL server is reachable for the tests and prints its SQLAlchemy URL.
# Order: an already running server on 127.0.0.1:5432; the machine's packaged cluster
# (pg_ctlcluster); else a throw-away cluster made with initdb in a temporary directory.
set -euo pipefail
url_default="postgresql+psycopg://postgres@127.0.0.1:5432/test"
if [ -n "${CTXSVC_TEST_POSTGRES_URL:-}" ]; then echo "$CTXSVC_TEST_POSTGRES_URL"; exit 0; fi

ready() { pg_isready -q -h 127.0.0.1 -p "$1" 2>/dev/null; }

if ready 5432; then echo "$url_default"; exit 0; fi
if ready 55432; then echo "postgresql+psycopg://postgres@127.0.0.1:55432/test"; exit 0; fi

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 2>&1 || true
  done
  for _ in $(seq 1 30); do ready 5432 && break; sleep 1; done
  if ready 5432; then
    runuser -u postgres -- psql -h 127.0.0.1 -p 5432 -tAc "SELECT 1 FROM pg_database WHERE datname='test'" 2>/dev/null | grep -q 1 \
      || runuser -u postgres -- createdb -h 127.0.0.1 -p 5432 test >&2 || true
    echo "$url_default"; exit 0
  fi
fi

# Throw-away cluster. initdb refuses to run as root, so it runs as the postgres user.
bindir=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -n 1)")")
port=55432
dir=$(mktemp -d /tmp/ctxsvc-pg.XXXXXX)
chown postgres "$dir" 2>/dev/null || true
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust >&2
as_pg "$bindir/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c listen_addresses=127.0.0.1" -l "$dir/log" -w start >&2
as_pg "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres test >&2
echo "postgresql+psycopg://postgres@127.0.0.1:$port/test"
