"""The ``ctxsvc`` command at its edges, run as an operator runs it (a real process each time):
an impossible argument is one line and a non-zero exit, ``--help`` reads as plain text with every
option explained, a misspelt setting is named once per start, and nothing is left beside the
database after migrating."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.servers import CTXSVC_BIN, clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

EXIT_TIMEOUT_SECONDS = 120.0
MISSPELT_WARNING = (
    "ctxsvc: warning: CTXSVC_DATABSE_URL is not a setting and is ignored; "
    "did you mean CTXSVC_DATABASE_URL?"
)


def run(arguments: list[str], cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CTXSVC_BIN), *arguments],
        cwd=cwd,
        env=clean_env(**settings),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            ["serve", "--port", "99999"],
            "ctxsvc: argument --port: 99999 is not a TCP port (0-65535) (see ctxsvc serve --help)",
        ),
        (
            ["serve", "--port", "65536"],
            "ctxsvc: argument --port: 65536 is not a TCP port (0-65535) (see ctxsvc serve --help)",
        ),
        (
            ["serve", "--port", "-1"],
            "ctxsvc: argument --port: -1 is not a TCP port (0-65535) (see ctxsvc serve --help)",
        ),
        (
            ["serve", "--port", "http"],
            "ctxsvc: argument --port: 'http' is not a port number (see ctxsvc serve --help)",
        ),
        (
            ["serve", "--workers", "0"],
            "ctxsvc: argument --workers: 0: at least 1 worker is needed (see ctxsvc serve --help)",
        ),
    ],
    ids=["port-99999", "port-65536", "port-negative", "port-word", "no-workers"],
)
def test_an_impossible_argument_is_one_line_and_status_2(
    tmp_path: Path, arguments: list[str], line: str
) -> None:
    done = run(arguments, tmp_path)
    assert (done.stdout + done.stderr).splitlines() == [line]
    assert done.returncode == 2
    assert not (tmp_path / "data").exists()  # nothing was created


def test_a_mistyped_command_is_one_line_naming_the_commands(tmp_path: Path) -> None:
    done = run(["serv"], tmp_path)
    (line,) = (done.stdout + done.stderr).splitlines()
    assert line.startswith("ctxsvc: argument {serve,migrate,openapi}: invalid choice: 'serv'")
    assert line.endswith("(see ctxsvc --help)")
    assert done.returncode == 2


def test_the_highest_port_is_accepted_as_an_argument(tmp_path: Path) -> None:
    # 65535 parses; on this machine it may be free or taken, but never an argument error.
    done = run(["serve", "--port", "65535", "--host", "256.0.0.1"], tmp_path)
    assert "is not a TCP port" not in done.stderr
    assert done.returncode == 1  # the host cannot be listened on: one line, not a traceback
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("ctxsvc: cannot listen on 256.0.0.1:65535")


@pytest.mark.parametrize("arguments", [["--help"], ["serve", "--help"], ["openapi", "--help"]])
def test_help_is_plain_text_and_explains_every_option(tmp_path: Path, arguments: list[str]) -> None:
    done = run(arguments, tmp_path)
    assert done.returncode == 0
    text = done.stdout
    assert "``" not in text  # no reStructuredText markup
    options = re.findall(r"^  (-[-\w]+(?:, --[-\w]+)?)(?: [A-Z_]+)?(.*)$", text, re.MULTILINE)
    assert options
    for option, description in options:
        assert description.strip(), f"{option} has no description:\n{text}"


def test_top_level_help_names_each_command_and_the_settings(tmp_path: Path) -> None:
    text = run(["--help"], tmp_path).stdout
    for command in ("serve", "migrate", "openapi"):
        assert re.search(rf"^ +{command} +\S", text, re.MULTILINE), text
    assert "docs/configuration.md" in text


def test_serve_help_gives_the_defaults(tmp_path: Path) -> None:
    text = run(["serve", "--help"], tmp_path).stdout
    assert "address to listen on (default: 127.0.0.1)" in text
    assert "TCP port to listen on (default: 8000)" in text


def test_a_misspelt_setting_is_named_once_when_serving(tmp_path: Path) -> None:
    env = clean_env(CTXSVC_DATABSE_URL="postgresql://db/ctxsvc")
    with running([serve_command(free_port())], env=env, cwd=tmp_path) as [server]:
        pass
    lines = server.log().splitlines()
    assert lines.count(MISSPELT_WARNING) == 1, server.log()
    assert lines[0] == MISSPELT_WARNING


def test_migrating_leaves_only_the_database_beside_it(tmp_path: Path) -> None:
    done = run(["migrate"], tmp_path)
    assert done.returncode == 0, done.stderr
    left = sorted(path.name for path in (tmp_path / "data").iterdir())
    assert not [name for name in left if "lock" in name], left
    assert "ctxsvc.db" in left


def test_serving_leaves_no_lock_file_beside_the_database(tmp_path: Path) -> None:
    env = clean_env()
    with running([serve_command(free_port()), serve_command(free_port())], env=env, cwd=tmp_path):
        pass
    left = sorted(path.name for path in (tmp_path / "data").iterdir())
    assert not [name for name in left if "lock" in name], left
