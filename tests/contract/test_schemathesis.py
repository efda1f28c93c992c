"""Schemathesis over the live spec of a real uvicorn process, with an API key configured, on
SQLite and on PostgreSQL: every check, every phase (examples, coverage, fuzzing, stateful), zero
failures. ``schemathesis.toml`` beside this file holds the settings and
``hooks.py`` the three replaced checks; ``docs/api-notes.md`` lists what is left out and why.

The server runs behind a proxy that does not exist, so that nothing a generated request makes it
do could leave the machine (sessions run on the offline ``local`` model anyway, see hooks).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO_ROOT, clean_env, free_port, running, uvicorn_command

pytestmark = pytest.mark.slow

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = Path(__file__).with_name("schemathesis.toml")
KEY = "contract-key-5f0c2a9e8b7d4c31"
DEAD_PROXY = f"http://127.0.0.1:{free_port()}"  # nothing listens there
RUN_TIMEOUT_SECONDS = 900


def test_the_live_spec_holds_on_every_check(empty_database_url: str, tmp_path: Path) -> None:
    env = clean_env(
        CTXSVC_DATABASE_URL=empty_database_url,
        CTXSVC_API_KEYS=json.dumps([KEY]),
        CTXSVC_JSON_LOGS="false",
        HTTP_PROXY=DEAD_PROXY,
        HTTPS_PROXY=DEAD_PROXY,
        ALL_PROXY=DEAD_PROXY,
        NO_PROXY="",
    )
    with running([uvicorn_command(free_port())], env=env, cwd=tmp_path) as (server,):
        run = subprocess.run(
            [
                str(SCHEMATHESIS),
                "--config-file",
                str(CONFIG),
                "--no-color",
                "run",
                f"{server.url}/openapi.json",
                "--checks",
                "all",
                "--exclude-checks",
                "positive_data_acceptance,negative_data_rejection,use_after_free",
                "--header",
                f"Authorization: Bearer {KEY}",
            ],
            # Its cache and reports go to the test's directory; the hooks come from this tree.
            cwd=tmp_path,
            env={**clean_env(), "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
    report = run.stdout[-20_000:] + run.stderr[-5_000:]
    assert run.returncode == 0, report
    # Every generated case passed (a run that tested nothing would not say so).
    counted = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counted is not None, report
    assert counted[1] == counted[2], report
    assert int(counted[1]) > 1000, report
