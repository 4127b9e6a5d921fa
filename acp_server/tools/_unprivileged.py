"""Run a program without ``CAP_SYS_PTRACE``: what a command started by an agent running as root gets.

Run as ``python -I -S _unprivileged.py PROGRAM ARGS...``: it drops ``CAP_SYS_PTRACE`` from its capability bounding
set (``prctl(PR_CAPBSET_DROP)``), then ``exec``s PROGRAM in its place (same pid, so the agent's handle, process group
and exit status are PROGRAM's). After that ``exec`` neither PROGRAM nor anything it starts has the capability, even
as root, so none can open the non-dumpable agent's ``/proc/<pid>/mem`` or ``fd/*`` nor attach to it. Used only when
the agent runs as root on Linux (for any other user the agent being non-dumpable is enough). Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

_PR_CAPBSET_DROP = 24
_CAP_SYS_PTRACE = 19


def main(argv: list[str]) -> None:
    program = argv[1:]
    with contextlib.suppress(OSError, AttributeError):  # best effort: without CAP_SETPCAP there is nothing to drop
        ctypes.CDLL(None, use_errno=True).prctl(_PR_CAPBSET_DROP, _CAP_SYS_PTRACE, 0, 0, 0)
    try:
        os.execv(program[0], program)
    except OSError as exc:
        os.write(2, f"{program[0]}: cannot run it: {exc.strerror or exc}\n".encode(errors="replace"))
    os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
