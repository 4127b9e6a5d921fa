"""A reconnecting slowloris against a real ``acp-server serve`` whose open-file limit is low (256: the cap is
lowered to fit): ``--connections`` half-sent connections kept open for ``--seconds`` (each one the daemon closes is
replaced at once). Every 5 s it prints the daemon's accept queue (its listening socket's backlog, from
``/proc/net/tcp``), how many of the flood's connections had their bytes taken by the daemon's kernel (acknowledged),
and the oldest of them.

Target: the accept queue never above the listen backlog + 1 (129), and no flood connection older than the header
timeout (``--header-timeout-ms``, 10 s) + 2 s whose bytes were taken: beyond the cap and the backlog connections
are refused (their bytes stay unacknowledged on our side), never left queued accepting bytes. Exit 1 if missed.
Run: ``python bench/bench_slowloris.py [--connections 1100] [--seconds 40]`` (Linux: reads ``/proc``).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import resource
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

LOW_FD_LIMIT = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'acp_server', 'serve', '--offline', '--no-persist', "
    "'--port', '0', '--header-timeout-ms', '10000'])"
)
HALF_SENT = b"GET /capabilities HTTP/1.1\r\nHost: 1"
BACKLOG = 128
HEADER_TIMEOUT_S = 10.0


def accept_queue(port: int) -> int:
    """The listening socket's current accept queue (``rx_queue`` of a LISTEN entry)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
            return int(fields[4].split(":")[1], 16)
    return -1


class Flood:
    """Non-blocking half-sent connections; one the daemon closes (or refuses) is replaced."""

    def __init__(self, host: str, port: int, count: int) -> None:
        self.address = (host, port)
        self.entries: list[list[object]] = [self._open() for _ in range(count)]

    def _open(self) -> list[object]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(self.address)
        return [sock, None, None]  # [socket, when its bytes were sent, when the daemon's kernel acknowledged them]

    def tick(self) -> None:
        poll = select.poll()
        for sock, sent_at, _ in self.entries:
            if sent_at is None:
                assert isinstance(sock, socket.socket)
                poll.register(sock, select.POLLOUT)
        writable = {fd for fd, _ in poll.poll(0)}
        for i, entry in enumerate(self.entries):
            sock, sent_at, acked_at = entry
            assert isinstance(sock, socket.socket)
            if sent_at is not None and acked_at is None and _unacked(sock) == 0:
                entry[2] = time.monotonic()
            try:
                if sent_at is None:
                    if sock.fileno() in writable and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                        sock.send(HALF_SENT)
                        entry[1] = time.monotonic()
                    continue
                if not sock.recv(65536):
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                sock.close()
                self.entries[i] = self._open()

    def established(self) -> tuple[int, float]:
        """(connections whose bytes the daemon's kernel took — acknowledged: nothing left in our send queue —, the
        longest any has been open since). One the kernel refused looks established here but keeps its bytes."""
        now = time.monotonic()
        ages = [now - acked for _, _, acked in self.entries if isinstance(acked, float)]
        return len(ages), max(ages, default=0.0)


def _unacked(sock: object) -> int:
    assert isinstance(sock, socket.socket)
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except OSError:
        return -1


def main(connections: int, seconds: float) -> int:
    print(f"command: python bench/bench_slowloris.py --connections {connections} --seconds {seconds:g}")
    print(f"target: accept queue <= {BACKLOG + 1}, no flood connection older than {HEADER_TIMEOUT_S + 2:g} s")
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    daemon = subprocess.Popen([sys.executable, "-c", LOW_FD_LIMIT], env=env, stderr=subprocess.PIPE)
    assert daemon.stderr is not None
    log = b""
    while not (found := re.search(rb"listening on http://(\S+):(\d+)\n", log)):
        chunk = daemon.stderr.read1(4096)
        if not chunk:
            sys.exit("the daemon ended: " + log.decode(errors="replace"))
        log += chunk
    host, port = found.group(1).decode(), int(found.group(2))
    lines: list[bytes] = []
    threading.Thread(target=lambda: lines.extend(iter(daemon.stderr.readline, b"")), daemon=True).start()
    try:
        flood = Flood(host, port, connections)
        started = last = time.monotonic()
        worst_queue = 0
        worst_age = 0.0
        while (now := time.monotonic()) - started < seconds:
            flood.tick()
            queue = accept_queue(port)
            worst_queue = max(worst_queue, queue)
            established, oldest = flood.established()
            if now - started > HEADER_TIMEOUT_S + 2:  # once the first connections could have timed out
                worst_age = max(worst_age, oldest)
            if now - last >= 5:
                last = now
                print(
                    f"  +{now - started:4.0f} s accept queue {queue:4d};"
                    f" {established:4d} accepting bytes, oldest {oldest:4.1f} s"
                )
            time.sleep(0.02)
    finally:
        daemon.terminate()
        daemon.wait(15)
    shortages = sum(b"cannot accept connections" in line for line in lines)
    met = worst_queue <= BACKLOG + 1 and worst_age <= HEADER_TIMEOUT_S + 2
    print(
        f"result: {'met' if met else 'MISSED'} — accept queue at most {worst_queue},"
        f" oldest connection {worst_age:.1f} s; descriptor-shortage log lines: {shortages}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--seconds", type=float, default=40.0)
    options = parser.parse_args()
    sys.exit(main(options.connections, options.seconds))
