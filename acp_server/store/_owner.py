"""Who is running a turn: a token per store instance, and whether the process behind a token is still alive.

A token is ``host|pid|start|instance``: ``start`` is the process start time from ``/proc`` (empty elsewhere), so a
recycled pid is not mistaken for the writer that died; ``instance`` tells two stores of one process apart.
"""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["make_instance", "make_owner", "owner_alive", "owner_pid"]


def _stat(pid: int) -> tuple[str, str]:
    """``(state, start time)`` from ``/proc/<pid>/stat``; empty strings where there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            data = stat.read()
    except OSError:
        return "", ""
    fields = data.rsplit(")", 1)[-1].split()  # fields[0] is field 3 (state), fields[19] field 22 (starttime)
    return (fields[0], fields[19]) if len(fields) > 19 else ("", "")


def make_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}|{pid}|{_stat(pid)[1]}|{uuid.uuid4().hex}"


def make_instance() -> str:
    """``host-pid-random8``: the public name of one store instance (one per process in the CLI), shown by ``/health``
    and in ``session_busy`` as the holder of a session; never a secret."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def owner_pid(owner: str | None) -> int | None:
    try:
        return int((owner or "").split("|")[1])
    except (IndexError, ValueError):
        return None


def owner_alive(owner: str | None) -> bool:
    """Whether the process of ``owner`` may still be running its turn.

    Another host's process cannot be checked; it counts as gone (a state directory shared between hosts is not
    supported by SQLite's locking anyway), so a session never stays busy forever.
    """
    parts = (owner or "").split("|")
    if len(parts) != 4:
        return False
    host, pid_text, start, _ = parts
    if host != socket.gethostname():
        return False
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        pass  # exists, belongs to someone else
    state, started = _stat(pid)
    if state in ("Z", "X"):  # killed, not yet reaped
        return False
    return not start or started in ("", start)
