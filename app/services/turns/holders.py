"""Lease holders this process can prove dead (spec §6, "Crash or restart").

A lease's owner names the process that runs the turn: ``host:pid:random``, followed by what
makes a pid unambiguous on that host — the kernel's boot id, the pid namespace and the
process's start time (``;boot=…;pidns=…;start=…``). A process on the same host, same boot and
same pid namespace that finds no process with that pid, or one that started at another time
(the pid was reused), knows the holder is gone: it frees the turn at once instead of waiting
for the lease to expire (a SIGKILLed single process, restarted, found its session ``busy`` for
25 s). Anything it cannot prove (another host, another container, an older owner without the
proof) is left to lease expiry.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

__all__ = ["host_prefix", "local_owner_id", "provably_gone"]


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    ``None`` when no such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else None


def local_owner_id() -> str:
    """This process's lease owner id (with the proof, where ``/proc`` provides it)."""
    pid = os.getpid()
    owner = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    boot, namespace, started = _boot_id(), _pid_namespace(), _start_time(pid)
    if boot is None or namespace is None or started is None:
        return owner
    return f"{owner};boot={boot};pidns={namespace};start={started}"


def host_prefix() -> str:
    """What every owner id of a process on this host starts with."""
    return f"{socket.gethostname()}:"


def provably_gone(owner: str) -> bool:
    """Whether the process ``owner`` names certainly no longer runs (see the module doc)."""
    head, _, proof_text = owner.partition(";")
    host, _, rest = head.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or not proof_text:
        return False
    proof = dict(part.partition("=")[::2] for part in proof_text.split(";"))
    if proof.get("boot") != _boot_id() or proof.get("pidns") != _pid_namespace():
        return False
    # This very process has its own start time: its own turns are never "gone".
    return _start_time(int(pid_text)) != proof.get("start")
