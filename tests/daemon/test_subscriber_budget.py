"""A subscriber's budget is bytes, merged pieces included: one that lags past it is dropped, and over real sockets
its connection is reset, so what the daemon and the kernel held for it is freed.

Every wait is bounded and ends on what the test watches (a drop, a reset), never on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from acp_server.daemon import Accepted, EventLog
from acp_server.daemon.rest import SEND_BUFFER_BYTES
from acp_server.domain import Prompt
from acp_server.provider.offline import Answer, LoopbackModel

from ._support import running_daemon

pytestmark = pytest.mark.anyio


def text_data(text: str) -> dict[str, Any]:
    return {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}


# -- the event log ----------------------------------------------------------------------------------------------


def test_merged_pieces_count_every_byte_toward_the_drop() -> None:
    """A reader that never takes its frames: the pieces merge (8 KiB entries, far fewer than ``queue_size``), yet
    it is dropped as soon as what it holds passes ``queue_bytes`` — and never held more."""
    log = EventLog("s", ring_size=16, queue_size=1024, queue_bytes=64 * 1024)
    subscription = log.subscribe()
    piece = "x" * 1000
    held: list[int] = []
    for _ in range(1000):  # 1 MB of text: 125 merged entries, under the frame cap
        log.publish_text("session_update", "message", piece, text_data)
        if subscription.dropped:
            break
        held.append(subscription.queued_bytes)
    assert subscription.dropped
    assert max(held) <= 64 * 1024 < max(held) + len(piece)  # dropped by the piece that would have passed it
    assert subscription.queued < 16  # entries: merged, far from 1024
    assert subscription.queued_bytes == 0 and log.subscriber_count == 0  # it holds nothing any more


def test_frames_count_their_bytes_and_a_lone_frame_larger_than_the_budget_is_kept() -> None:
    log = EventLog("s", ring_size=16, queue_size=1024, queue_bytes=64 * 1024)
    big, small = log.subscribe(), log.subscribe()
    log.publish("tool_call", {"diff": "d" * 100_000})  # alone in its queue: kept (a frame can always be sent)
    assert not big.dropped and big.queued == 1 and big.queued_bytes > 100_000
    log.publish("tool_call", {"pad": "p"})
    assert big.dropped  # anything more while it holds that much is over the budget
    small_frames = 0
    while not small.dropped:
        log.publish("session_update", {"pad": "p" * 4000})
        small_frames += 1
    assert small_frames < 20  # dropped by its bytes (about 64 KiB), not by the 1024-frame cap


async def test_a_reader_that_keeps_up_is_never_dropped_for_the_bytes_it_was_sent() -> None:
    log = EventLog("s", ring_size=16, queue_size=1024, queue_bytes=8 * 1024)
    subscription = log.subscribe()
    got = 0
    for _ in range(200):  # 200 KB in all, 25 times the budget: taken as it comes
        log.publish_text("session_update", "message", "y" * 1000, text_data)
        frames = await subscription.receive()
        assert frames is not None
        got += len(frames)
    assert not subscription.dropped and got == 200


# -- the daemon over real sockets -------------------------------------------------------------------------------

SUBSCRIBERS = 20
WORD_BYTES = 1024
WORDS = 4096  # 4 MiB of text: merged while it waits, 512 entries — under the frame cap set below


def _daemon_sockets_with_queued_bytes(port: int) -> int:
    """Sockets of the daemon's port (its side) whose kernel send queue is not empty (from ``/proc/net/tcp``)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.rsplit(":", 1)[1], 16) == port and state == "01" and int(queues.split(":")[0], 16) > 0:
            count += 1
    return count


async def _subscribe_without_reading(host: str, port: int, session_id: str) -> socket.socket:
    """A subscriber that reads the response head, then nothing: its receive buffer is tiny, so the daemon's
    queues fill."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, port))
    await loop.sock_sendall(sock, f"GET /session/{session_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += await loop.sock_recv(sock, 1)
    assert head.startswith(b"HTTP/1.1 200")
    return sock


async def _reset(sock: socket.socket) -> bool:
    """Read what is left; True when the connection ends in a reset (how the daemon ends a dropped subscriber)."""
    loop = asyncio.get_running_loop()
    try:
        while await loop.sock_recv(sock, 65536):
            pass
    except ConnectionResetError:
        return True
    return False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the kernel's socket table (Linux)")
async def test_non_reading_subscribers_of_merged_text_are_reset_and_their_kernel_queues_freed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    words = [("" if i == 0 else " ") + f"w{i:05d}".ljust(WORD_BYTES - 1, "x") for i in range(WORDS)]
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="".join(words), reasoning=""))
        budget = {"subscriber_queue_size": 4096, "subscriber_queue_bytes": 128 * 1024}
        async with running_daemon(model, **budget) as served:
            daemon = served.daemon
            accepted: list[Accepted] = []
            submit = daemon.submit_prompt

            def capture_prompt(session_id: str, prompt: Prompt, *, deadline_ms: int | None = None) -> Accepted:
                accepted.append(submit(session_id, prompt, deadline_ms=deadline_ms))
                return accepted[-1]

            monkeypatch.setattr(daemon, "submit_prompt", capture_prompt)
            session_id = await served.new_session()
            log = daemon.event_log(session_id)
            host, port = served.url.removeprefix("http://").rsplit(":", 1)
            socks: list[socket.socket] = []
            try:
                with anyio.fail_after(30):
                    for _ in range(SUBSCRIBERS):
                        socks.append(await _subscribe_without_reading(host, int(port), session_id))
                    assert log.subscriber_count == SUBSCRIBERS  # each subscribed before its response's head
                    subscriptions = list(log._subscribers)
                    assert (await served.prompt(session_id, "go")).status_code == 202
                with anyio.fail_after(45):
                    assert await accepted[0].handle.result() == "end_turn"
                    for subscription in subscriptions:  # the whole answer is published by now: 32 budgets
                        await subscription.dropped_event.wait()
                    assert log.subscriber_count == 0
                    for sock in socks:
                        assert await _reset(sock)  # reset: nothing more is sent, the kernel's queues are gone
                # the daemon's side sent the reset by closing: its sockets, and what their queues held, are gone
                assert _daemon_sockets_with_queued_bytes(int(port)) == 0
            finally:
                for sock in socks:
                    sock.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the kernel's socket table (Linux)")
async def test_the_kernel_holds_a_bounded_send_queue_for_a_subscriber_that_does_not_read() -> None:
    """The event stream's send buffer is capped: with a budget large enough that it is never dropped here, a
    subscriber that reads nothing makes the daemon's queue grow while the kernel's stays bounded."""
    async with running_daemon(None, subscriber_queue_bytes=64 * 1024 * 1024, subscriber_queue_size=1 << 20) as served:
        session_id = await served.new_session()
        log = served.daemon.event_log(session_id)
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        sock = await _subscribe_without_reading(host, int(port), session_id)
        try:
            [subscription] = list(log._subscribers)
            with anyio.fail_after(30):
                while subscription.queued_bytes < 8 * 1024 * 1024:  # the kernel's queues are full by then
                    log.publish("session_update", {"pad": "x" * 16384})
                    await anyio.lowlevel.checkpoint()
            queued = _daemon_send_queue(int(port))
            assert 0 < queued <= 2 * SEND_BUFFER_BYTES, queued
        finally:
            sock.close()


def _daemon_send_queue(port: int) -> int:
    """The largest kernel send queue among the daemon's sockets on ``port``."""
    largest = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
            largest = max(largest, int(fields[4].split(":")[0], 16))
    return largest
