"""Which lease holders a process can prove dead: only its own host's, same boot and pid
namespace, whose pid no longer runs the process that started then."""

from __future__ import annotations

import socket
import subprocess
import sys

from app.services.turns.holders import local_owner_id, provably_gone


def owner_of_a_finished_process() -> str:
    """The owner id a child process would have used, read after the child exited."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from app.services.turns.holders import local_owner_id as o; print(o())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_live_process_is_never_gone() -> None:
    assert not provably_gone(local_owner_id())


def test_a_process_that_exited_is_gone() -> None:
    assert provably_gone(owner_of_a_finished_process())


def test_what_cannot_be_proved_is_left_to_lease_expiry() -> None:
    dead = owner_of_a_finished_process()
    head, _, proof = dead.partition(";")
    assert not provably_gone(head)  # an owner id without the proof (older versions)
    assert not provably_gone("other-host" + dead[len(socket.gethostname()) :])
    other_boot = dead.replace("boot=", "boot=0", 1)
    assert not provably_gone(other_boot)
    assert not provably_gone(dead.replace("pidns=", "pidns=x", 1))
    assert not provably_gone("garbage")
    assert proof
