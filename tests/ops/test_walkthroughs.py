"""The walk-throughs in ``docs/walkthroughs/``, run as a newcomer runs them: the service started
by the documented command, then every ``python`` block in order in one Python process, each
block's printed output compared with the ``text`` block that follows it in the document.

One thing differs from a reader's terminal: the server listens on a free port instead of 8000
(the address in the blocks is rewritten).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import REPO_ROOT, ServerProcess, clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

WALKTHROUGHS = REPO_ROOT / "docs" / "walkthroughs"
DOCUMENTED_ADDRESS = "http://127.0.0.1:8000"
MARK = "-----8<----- end of block -----8<-----"
# Runs the blocks as one session of the interpreter would: shared globals, in order.
DRIVER = f"""
import json, sys
namespace = {{"__name__": "__main__"}}
for block in json.load(sys.stdin):
    exec(compile(block, "<walk-through block>", "exec"), namespace)
    print({MARK!r}, flush=True)
"""


def blocks(document: Path) -> list[tuple[str, str]]:
    """Each ``python`` block with the ``text`` block right after it ("" when none)."""
    found = re.findall(r"```(python|text|bash)\n(.*?)```", document.read_text(), flags=re.S)
    pairs: list[tuple[str, str]] = []
    for kind, body in found:
        if kind == "python":
            pairs.append((body, ""))
        elif kind == "text" and pairs and pairs[-1][1] == "":
            pairs[-1] = (pairs[-1][0], body)
    return pairs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cwd = tmp_path_factory.mktemp("walkthroughs")
    with running([serve_command(free_port())], env=clean_env(), cwd=cwd) as [server]:
        yield server


@pytest.mark.parametrize("name", ["support-agent.md", "coding-agent.md"])
def test_the_walkthrough_runs_as_written(name: str, server: ServerProcess, tmp_path: Path) -> None:
    document = WALKTHROUGHS / name
    # The service is started as the document says.
    assert ".venv/bin/ctxsvc serve" in document.read_text()
    pairs = blocks(document)
    assert len(pairs) >= 5
    code = [body.replace(DOCUMENTED_ADDRESS, server.url) for body, _ in pairs]
    env = clean_env(PYTHONPATH=str(REPO_ROOT / "clients" / "python" / "src"))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(code),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split(MARK + "\n")
    assert printed[-1] == ""
    for (body, expected), output in zip(pairs, printed[:-1], strict=True):
        assert output == expected, f"{name}: the block\n{body}\nprinted\n{output}"
