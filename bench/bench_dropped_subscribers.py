"""Subscribers that stop reading give back what they hold: a real ``acp-server serve`` process, the loopback model,
``--subscribers`` raw SSE connections that read their response head and then nothing, while one prompt streams a
``--mib`` MiB answer (1 KiB words: a lagging subscriber gets them merged, 8 KiB per frame).

Each second it prints the daemon's RSS, how many of the subscribers' sockets the daemon still has (its side, from
``/proc/net/tcp``) and the bytes in their kernel send queues. A subscriber is dropped once 1 MiB (every merged
chunk counted) waits for it, and its connection reset: the sockets go, their queues with them.

The same answer first streams to no subscriber (the control: what the answer itself leaves in the daemon, its
session's history included). Target: within 30 s of the answer's end, the subscribers' sockets gone and the
daemon's RSS back — grown by at most the control's growth + 32 MiB. Exit 1 if missed.
Run: ``python bench/bench_dropped_subscribers.py [--subscribers 200] [--mib 64]`` (Linux: reads ``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

import anyio
import httpx2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _proc import rss_kib

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.provider.offline import Answer, LoopbackModel

WORD_BYTES = 1024
RSS_SLACK_KIB = 32 * 1024
WITHIN_S = 30.0


def daemon_sockets(port: int, peers: set[int]) -> tuple[int, int]:
    """(sockets, bytes in their send queues) of the daemon's side of the connections from ``peers`` (local ports)."""
    count = queued = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, queues = fields[1], fields[2], fields[4]
        if int(local.rsplit(":", 1)[1], 16) == port and int(remote.rsplit(":", 1)[1], 16) in peers:
            count += 1
            queued += int(queues.split(":")[0], 16)
    return count, queued


def subscribe_without_reading(host: str, port: int, session_id: str) -> socket.socket:
    sock = socket.create_connection((host, port))
    sock.sendall(f"GET /session/{session_id}/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"subscribe answered {head[:40]!r}")
    return sock


async def prompt(client: httpx2.AsyncClient, session_id: str, wait: bool) -> httpx2.Response:
    body = {"prompt": [{"type": "text", "text": "go"}]}
    return await client.post(f"/session/{session_id}/prompt", params={"wait": str(wait).lower()}, json=body)


async def main(subscribers: int, mib: int) -> int:
    print(f"command: python bench/bench_dropped_subscribers.py --subscribers {subscribers} --mib {mib}")
    print(
        f"target: sockets gone and daemon RSS back (grown by at most the control's + {RSS_SLACK_KIB // 1024} MiB)"
        f" within {WITHIN_S:.0f} s of the answer's end"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    words = [("" if i == 0 else " ") + f"w{i:06d}".ljust(WORD_BYTES - 1, "x") for i in range(mib * 1024)]
    async with LoopbackModel() as model:
        text = "".join(words)
        answer = Answer(text=text, reasoning="")
        model.enqueue(Answer(text="warm up", reasoning=""), answer, answer)
        command = [
            *(sys.executable, "-m", "acp_server", "serve", "--base-url", model.base_url, "--model", "m"),
            *("--port", "0", "--no-persist", "--log-level", "WARNING"),
        ]
        async with await anyio.open_process(command, env=env, stdin=None) as process:
            assert process.stderr is not None
            stderr = b""
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    stderr += chunk
                    match = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"http://(\S+):(\d+)\n", stderr)
                    if match:
                        host, port = match.group(1).decode(), int(match.group(2))
                        break
            socks: list[socket.socket] = []
            try:
                async with httpx2.AsyncClient(base_url=f"http://{host}:{port}", timeout=120) as client:
                    control_id = (await client.post("/session", json={"cwd": "/tmp"})).json()["sessionId"]
                    await prompt(client, control_id, wait=True)  # the model client loaded: RSS at its level
                    control_before = rss_kib(process.pid)
                    await prompt(client, control_id, wait=True)  # the long answer, to no subscriber
                    before = rss_kib(process.pid)
                    allowed = before + (before - control_before) + RSS_SLACK_KIB
                    print(
                        f"  control: the answer to no subscriber: RSS {control_before / 1024:.0f} →"
                        f" {before / 1024:.0f} MiB"
                    )
                    session_id = (await client.post("/session", json={"cwd": "/tmp"})).json()["sessionId"]
                    for _ in range(subscribers):
                        socks.append(await anyio.to_thread.run_sync(subscribe_without_reading, host, port, session_id))
                    peers = {sock.getsockname()[1] for sock in socks}
                    print(f"  daemon RSS {before / 1024:.0f} MiB before; {len(socks)} subscribers reading nothing")
                    started = time.monotonic()
                    ended: float | None = None
                    gone: float | None = None
                    peak_rss = peak_queued = 0
                    async with anyio.create_task_group() as tg:

                        async def run_prompt() -> None:
                            nonlocal ended
                            answer = await prompt(client, session_id, wait=True)
                            ended = time.monotonic()
                            print(f"  +{ended - started:5.1f} s the answer ended: {json.dumps(answer.json())}")

                        tg.start_soon(run_prompt)
                        while True:
                            await anyio.sleep(1.0)
                            now = time.monotonic()
                            rss = rss_kib(process.pid)
                            count, queued = daemon_sockets(port, peers)
                            peak_rss, peak_queued = max(peak_rss, rss), max(peak_queued, queued)
                            print(
                                f"  +{now - started:5.1f} s RSS {rss / 1024:6.0f} MiB; {count:4d} subscriber sockets,"
                                f" {queued / 2**20:7.1f} MiB in their kernel send queues"
                            )
                            if count == 0 and gone is None:
                                gone = now
                            back = count == 0 and rss <= allowed
                            if ended is not None and (back or now - ended > WITHIN_S):
                                break
                    assert ended is not None
                    met = back
                    print(
                        f"peak: RSS {peak_rss / 1024:.0f} MiB, {peak_queued / 2**20:.0f} MiB in kernel send queues;"
                        f" sockets gone at +{gone - started:.1f} s, the answer ended at +{ended - started:.1f} s"
                        if gone is not None
                        else "sockets NOT gone"
                    )
                    print(
                        f"result: {'met' if met else 'MISSED'} — RSS {rss / 1024:.0f} MiB"
                        f" (allowed {allowed / 1024:.0f}) {max(0.0, now - ended):.1f} s after the answer's end"
                    )
                    return 0 if met else 1
            finally:
                for sock in socks:
                    sock.close()
                process.terminate()
                with anyio.move_on_after(15):
                    await process.wait()
                if process.returncode is None:
                    process.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--mib", type=int, default=64)
    options = parser.parse_args()
    sys.exit(anyio.run(main, options.subscribers, options.mib))
