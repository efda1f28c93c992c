#!/usr/bin/env bash
# Build the image and check it as an operator would, on a machine with podman but no Docker
# engine and no registry (the base image comes from /work/shared/tools/container-base.sh or any
# local python:3.11-slim). Prints the image size; fails if the image cannot count tokens with no
# network at all, or does not serve /healthz and /readyz.
#
#     bash scripts/check-container.sh            # as root
set -euo pipefail
cd "$(dirname "$0")/.."
P="podman --storage-driver vfs --cgroup-manager cgroupfs"
IMAGE=${IMAGE:-localhost/ctxsvc-check}
$P build --isolation chroot --pull=never --format docker -t "$IMAGE" . >/tmp/ctxsvc-build.log 2>&1 \
  || { tail -30 /tmp/ctxsvc-build.log; exit 1; }
bytes=$($P image inspect --format '{{.Size}}' "$IMAGE")
echo "image $IMAGE: $((bytes / 1000000)) MB ($bytes bytes)"
mnt=$($P image mount "$IMAGE")
trap '$P image unmount "$IMAGE" >/dev/null' EXIT
run() { chroot --userspec=ctxsvc:ctxsvc "$mnt" env -i PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
  PYTHONPATH=/srv HOME=/srv "$@"; }
# No build tools in the final stage, and no installer in the service's virtualenv.
for tool in gcc cc c++ make; do
  if chroot "$mnt" sh -c "command -v $tool" >/dev/null 2>&1; then echo "final stage has $tool"; exit 1; fi
done
for leftover in /opt/venv/bin/pip /opt/venv/lib/python3.11/site-packages/numpy /opt/tokenizers; do
  if [ -e "$mnt$leftover" ]; then echo "final stage has $leftover"; exit 1; fi
done
# Exact counts from the shipped vocabularies, in a network namespace with no interface up.
unshare --net chroot --userspec=ctxsvc:ctxsvc "$mnt" env -i PATH=/opt/venv/bin:/usr/bin:/bin \
  PYTHONPATH=/srv sh -c 'cd /srv && python -c "
from app.providers.tokenizers import get_counter
for name in (\"tiktoken:o200k_base\", \"tiktoken:cl100k_base\"):
    assert get_counter(name).count_text(\"2 + 2 = 4\") == 7, name
print(\"exact counters load offline\")
"'
# The service itself: migrates its SQLite file, then answers /healthz and /readyz.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$mnt/tmp/check-data" && chown -R "$(chroot "$mnt" id -u ctxsvc):$(chroot "$mnt" id -g ctxsvc)" "$mnt/tmp/check-data"
run sh -c "cd /srv && CTXSVC_DATABASE_URL=sqlite:////tmp/check-data/ctxsvc.db exec ctxsvc serve --port $port" \
  >/tmp/ctxsvc-check-serve.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; $P image unmount "$IMAGE" >/dev/null' EXIT
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { cat /tmp/ctxsvc-check-serve.log; exit 1; }
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$port/healthz"; echo
curl -fsS "http://127.0.0.1:$port/readyz"; echo
ls "$mnt/tmp/check-data"
if ls "$mnt/tmp/check-data" | grep -q lock; then echo "a lock file was left beside the database"; exit 1; fi
echo "container check passed; image size $((bytes / 1000000)) MB"
