"""The watchdog of a local command: no command outlives the agent, however the agent dies.

Run as ``python -I -S _command_watchdog.py PGID`` in a session of its own, with stdin the read end of a pipe whose
write end only the agent holds. It waits for end of file on stdin, which comes when the agent is gone however it
died (the kernel closes a dead process's descriptors, after a kill -9 too), and then sends SIGKILL to the process group
``PGID`` (the command's shell and everything it started in its group; a SIGTERM handler changes nothing). The agent
stops it (SIGKILL, then reaps it) once the command's group is gone, before it closes its end of the pipe.

A pipe rather than ``PR_SET_PDEATHSIG``: that signal fires when the *thread* that forked exits (the agent spawns
from whichever thread runs its event loop, or a worker), reaches only the direct child, and needs code between fork
and exec in a threaded process; end of file on a pipe means the whole process is gone, on every POSIX system.
Standard library only, nothing imported from the package: it starts in about 10 ms.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def main(argv: list[str]) -> None:
    pgid = int(argv[1])
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):  # only the agent's end stops the watch
        signal.signal(number, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv)
