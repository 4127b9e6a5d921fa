"""The slowloris remainder: connections beyond what the daemon serves do not wait in a deep listen backlog sending
bytes. A real ``acp-server serve`` process, stopped (SIGSTOP) so it accepts nothing: the kernel completes at most
``LISTEN_BACKLOG`` (+1) handshakes for it and refuses the rest; once it runs again, every queued half-sent
connection is closed — displaced at once over ``--max-connections``, or at its header deadline.

No timing: while the daemon is stopped its backlog cannot drain, so a connection either completed or never will.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys

import anyio
import pytest

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.daemon.server import LISTEN_BACKLOG

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

EXTRA = 8  # connections tried beyond the backlog: each is refused (and waits out the 0.2 s connect timeout)
HALF_SENT = b"GET /capabilities HTTP/1.1\r\nHost: 1"


def _connect_or_refused(host: str, port: int) -> socket.socket | None:
    """A connection with half-sent headers, or None when the kernel does not complete the handshake.

    The daemon is stopped: a handshake the kernel would complete completes at once (loopback), one it refuses (its
    backlog full) never does — the short timeout only saves the test from waiting for the SYN retries.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(0.2)
    try:
        sock.connect((host, port))
    except (TimeoutError, OSError):
        sock.close()
        return None
    sock.sendall(HALF_SENT)
    return sock


def _closed_by_the_daemon(sock: socket.socket) -> bool:
    """Read until the daemon closes (with or without an error response first); False when it stays open 30 s."""
    sock.settimeout(30)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


@pytest.mark.timeout(180)
async def test_beyond_the_backlog_connections_are_refused_and_the_queued_ones_are_closed() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    args = ["serve", "--offline", "--no-persist", "--port", "0", "--max-connections", "16"]
    args += ["--header-timeout-ms", "2000"]
    process = await anyio.open_process([sys.executable, "-m", "acp_server", *args], env=env, stdin=subprocess.DEVNULL)
    stderr = bytearray()
    accepted: list[socket.socket] = []
    async with process:
        try:
            assert process.stderr is not None
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    stderr += chunk
                    found = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"http://(\S+):(\d+)\n", bytes(stderr))
                    if found:
                        host, port = found.group(1).decode(), int(found.group(2))
                        break
            os.kill(process.pid, signal.SIGSTOP)  # it accepts nothing now: only the kernel's backlog takes them
            refused = 0
            try:
                for _ in range(LISTEN_BACKLOG + 1 + EXTRA):
                    sock = await anyio.to_thread.run_sync(_connect_or_refused, host, port)
                    if sock is None:
                        refused += 1
                    else:
                        accepted.append(sock)
            finally:
                os.kill(process.pid, signal.SIGCONT)
            assert len(accepted) <= LISTEN_BACKLOG + 1  # the kernel queues no more (Linux: backlog + 1)
            assert refused >= EXTRA
            # Running again: each queued connection is accepted, then displaced (over the cap of 16) or, among the
            # last 16, closed at its header deadline — none is left open.
            still_open = [
                sock for sock in accepted if not await anyio.to_thread.run_sync(_closed_by_the_daemon, sock)
            ]
            assert not still_open, f"{len(still_open)} of {len(accepted)} queued connections were left open"
        finally:
            for sock in accepted:
                sock.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            with anyio.fail_after(15):
                await process.wait()
