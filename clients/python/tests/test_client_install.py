"""A calling service installs the client alone: into a fresh virtual environment, offline.

pip installs ``clients/python`` (built from its own ``pyproject.toml``) with ``--no-index`` from a
wheelhouse of exactly the distributions the client's requirements reach in this environment,
repacked from their installed files (a test reaches no registry). Whatever else the client
needed, pip would refuse; whatever of the service it pulled in, the check below would see.
Then the installed client runs a turn against the real service.
"""

from __future__ import annotations

import csv
import importlib.metadata as metadata
import io
import json
import re
import subprocess
import sys
import tomllib
import zipfile
from base64 import urlsafe_b64encode
from hashlib import sha256
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

CLIENT = Path(__file__).resolve().parents[1]
NEVER = {
    "fastapi",
    "starlette",
    "sqlalchemy",
    "uvicorn",
    "tiktoken",
    "alembic",
    "psycopg",
    "ctxsvc",
}
# pip-installed metadata that a wheel does not carry (pip writes its own).
INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions ``requirements`` reach, by canonical name."""
    found: dict[str, metadata.Distribution] = {}
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        distribution = metadata.distribution(requirement.name)
        assert requirement.specifier.contains(distribution.version, prereleases=True), (
            f"{requirement} is not satisfied here by {distribution.version}"
        )
        found[name] = distribution
        pending += [Requirement(r) for r in distribution.requires or []]
    return found


def repack(distribution: metadata.Distribution, wheelhouse: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists."""
    wheel_text = distribution.read_text("WHEEL") or ""
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")
    ]
    assert tags, f"{distribution.metadata['Name']} has no WHEEL tags"
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"])
    path = wheelhouse / f"{name}-{distribution.version}-{tags[0]}.whl"
    record: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in distribution.files or []:
            relative = file.as_posix()
            if relative.startswith("..") or "__pycache__" in relative:
                continue  # console scripts (pip makes them anew) and bytecode
            if Path(relative).name in INSTALLER_FILES and ".dist-info/" in relative:
                continue
            data = Path(str(file.locate())).read_bytes()
            wheel.writestr(relative, data)
            digest = urlsafe_b64encode(sha256(data).digest()).rstrip(b"=").decode()
            record.append((relative, f"sha256={digest}", str(len(data))))
        info = next(
            p.parent for p in map(Path, map(str, distribution.files or [])) if p.name == "METADATA"
        )
        out = io.StringIO()
        csv.writer(out).writerows([*record, (f"{info.as_posix()}/RECORD", "", "")])
        wheel.writestr(f"{info.as_posix()}/RECORD", out.getvalue())
    return path


def run(*command: str | Path, cwd: Path) -> str:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600, env={}
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_client_installs_alone_into_a_fresh_venv(tmp_path: Path, server: ServerProcess) -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())
    needed = closure(project["project"]["dependencies"])
    builders = closure(project["build-system"]["requires"])
    assert not NEVER & needed.keys()
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for distribution in {**needed, **builders}.values():
        repack(distribution, wheelhouse)

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    pip = (python, "-m", "pip", "--disable-pip-version-check", "--no-input")
    run(*pip, "install", "--no-index", "--find-links", wheelhouse, CLIENT, cwd=tmp_path)
    run(*pip, "check", cwd=tmp_path)

    installed = {
        canonicalize_name(p["name"])
        for p in json.loads(run(*pip, "list", "--format=json", cwd=tmp_path))
    }
    # Exactly the client, what it needs, and what every venv has.
    assert installed - {"pip", "setuptools"} == {"ctxsvc-client", *needed}
    assert not NEVER & installed

    script = f"""
import sys
from ctxsvc_client import Client
with Client({server.url!r}) as client:
    session = client.create_session(model_id="local", agent={{"system_prompt": "Hi."}})
    turn = client.run_turn(session.id, "Hello from a fresh venv.")
print(turn.status)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("app", "fastapi", "sqlalchemy")))
"""
    output = run(python, "-c", script, cwd=tmp_path).split("\n")
    assert output[:2] == ["completed", "[]"]
