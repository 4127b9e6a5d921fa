"""Exhaustion: the connection cap, header and body deadlines, resetting dropped subscribers, the EMFILE log, the
model pool. Real uvicorn on 127.0.0.1 and raw sockets: these are network behaviours (every wait is bounded)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import SocketStream

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.daemon.server import AcceptErrorLog
from acp_server.provider import make_openai_client

from ._support import running_daemon, schema_validator

pytestmark = pytest.mark.anyio


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@asynccontextmanager
async def raw(url: str) -> AsyncIterator[SocketStream]:
    host, port = _address(url)
    async with await anyio.connect_tcp(host, port) as stream:
        yield stream


async def read_to_end(stream: SocketStream, timeout: float = 5.0) -> bytes:
    """Everything the server sends until it closes (bounded)."""
    data = b""
    with anyio.fail_after(timeout):
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return data


def parse(raw_response: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw_response.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body) if body else None


async def get_health(url: str) -> int:
    async with raw(url) as stream:
        await stream.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return parse(await read_to_end(stream))[0]


async def get_health_within_tries(url: str, tries: int) -> int:
    """``/health`` as a client under a flood sees it: a connection closed before its answer is tried again."""
    for _ in range(tries - 1):
        with contextlib.suppress(IndexError, OSError, anyio.BrokenResourceError):
            return await get_health(url)
    return await get_health(url)


# -- headers ---------------------------------------------------------------------------------------------------


async def test_incomplete_headers_are_408_and_a_silent_connection_is_closed() -> None:
    # The timer runs from the connection's opening: long enough that a loaded machine still sends the first bytes
    # within it (else the half-sent connection would count as a silent one).
    async with running_daemon(None, header_timeout_s=1.0) as served:
        async with raw(served.url) as half, raw(served.url) as silent:
            await half.send(b"GET /health HTTP/1.1\r\nHost: 127.0")
            status, headers, body = parse(await read_to_end(half))
            assert status == 408 and headers["connection"] == "close"
            assert body == {
                "code": "request_timeout",
                "error": "The request headers were not complete within 1 s",
                "part": "headers",
                "timeoutMs": 1000,
            }
            assert await read_to_end(silent) == b""
        assert await get_health(served.url) == 200


async def test_a_flood_of_half_sent_connections_is_displaced_and_health_answers() -> None:
    async with running_daemon(None, max_connections=20) as served, contextlib.AsyncExitStack() as stack:
        flood = [await stack.enter_async_context(raw(served.url)) for _ in range(60)]
        for stream in flood:
            await stream.send(b"GET /capabilities HTTP/1.1\r\nHost: 1")
        assert await get_health(served.url) == 200  # a newcomer displaces the oldest half-sent one
        # The 40 oldest were displaced: closed (with a 503 when their partial request had reached the daemon).
        for stream in flood[:40]:
            response = await read_to_end(stream)
            assert not response or parse(response)[2]["code"] == "too_many_connections"


async def test_at_the_cap_with_every_connection_busy_a_newcomer_gets_503() -> None:
    async with running_daemon(None, max_connections=3, heartbeat_s=0.05) as served:
        session_id = await served.new_session()
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(2):  # with the test's own keep-alive client: 3 connections in use
                response = await stack.enter_async_context(served.client.stream("GET", f"/session/{session_id}/events"))
                assert response.status_code == 200
            # served.client's pool holds one connection (idle keep-alive = displaceable): make it busy.
            busy = await stack.enter_async_context(served.client.stream("GET", f"/session/{session_id}/events"))
            assert busy.status_code == 200
            async with raw(served.url) as newcomer:
                status, headers, body = parse(await read_to_end(newcomer))
        assert status == 503 and headers["retry-after"] == "5"
        schema_validator("TooManyConnectionsError").validate(body)
        assert body == {
            "code": "too_many_connections",
            "error": "Too many open connections (limit 3); retry later",
            "limit": 3,
        }


# -- bodies ----------------------------------------------------------------------------------------------------


async def test_an_incomplete_body_is_408_and_the_connection_closed() -> None:
    async with running_daemon(None, body_timeout_s=0.2) as served:
        async with raw(served.url) as stream:
            await stream.send(
                b"POST /session HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"cwd": '
            )
            status, headers, body = parse(await read_to_end(stream))
        assert status == 408 and headers["connection"] == "close"
        assert body["code"] == "request_timeout" and body["part"] == "body"
        schema_validator("RequestTimeoutError").validate(body)
        assert served.bridge.sessions == ()


async def test_an_event_stream_outlives_the_header_and_body_timeouts() -> None:
    async with running_daemon(None, header_timeout_s=0.05, body_timeout_s=0.05, heartbeat_s=0.05) as served:
        session_id = await served.new_session()
        async with served.client.stream("GET", f"/session/{session_id}/events") as response:
            lines = response.aiter_lines()
            with anyio.fail_after(10):
                beats = 0
                while beats < 12:  # 12 heartbeats = 0.6 s: many times either timeout
                    beats += await lines.__anext__() == ": keep-alive"
            async with served.events(session_id) as events:
                await served.prompt(session_id, wait="true")  # a request on the same client still works
                seen = await events.until(lambda e: e.event == "turn_error")  # no model configured
                assert seen[0].event == "prompt_accepted"


# -- subscribers dropped for lagging -------------------------------------------------------------------------------


async def test_a_dropped_subscriber_whose_peer_does_not_read_is_reset() -> None:
    async with running_daemon(None, subscriber_queue_size=4) as served:
        session_id = await served.new_session()
        log = served.daemon.event_log(session_id)
        host, port = _address(served.url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            sock.sendall(f"GET /session/{session_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = b""
            with anyio.fail_after(5):
                while b"\r\n\r\n" not in head:  # the response has started: the daemon has subscribed
                    head += await asyncio.get_running_loop().sock_recv(sock, 1)
                subscription = next(iter(log._subscribers))
                while not subscription.dropped:  # the peer reads nothing: the kernel queues fill, then ours
                    log.publish("session_update", {"pad": "x" * 16384})
                    await anyio.lowlevel.checkpoint()
            with anyio.fail_after(5):  # now read: the connection was reset, not ended politely
                with pytest.raises(ConnectionResetError):
                    while await asyncio.get_running_loop().sock_recv(sock, 65536):
                        pass
        finally:
            sock.close()


# -- accept() out of descriptors --------------------------------------------------------------------------------


def _emfile_context() -> dict[str, Any]:
    return {
        "message": "socket.accept() out of system resource",
        "exception": OSError(errno.EMFILE, "Too many open files"),
    }


async def test_accept_running_out_of_descriptors_is_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    async with running_daemon(None):
        loop = asyncio.get_running_loop()
        with caplog.at_level(logging.ERROR):
            for _ in range(2048):  # asyncio reports each failed accept() of a wake-up, up to the backlog
                loop.call_exception_handler(_emfile_context())
        records = [r for r in caplog.records if "accept" in r.getMessage()]
        assert len(records) == 1 and records[0].exc_info is None
        assert "Too many open files" in records[0].getMessage()


def test_the_accept_error_log_counts_what_it_suppressed_and_passes_the_rest_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    passed: list[dict[str, Any]] = []
    handler = AcceptErrorLog(lambda loop, context: passed.append(context), interval_s=10, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR):
            for _ in range(100):
                handler(loop, _emfile_context())
            now[0] = 10.0
            handler(loop, _emfile_context())
            handler(loop, {"message": "something else", "exception": ValueError("x")})
    finally:
        loop.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "(99 more in the last 10s)" in messages[1]
    assert [c["message"] for c in passed] == ["something else"]


# -- the model client's pool ----------------------------------------------------------------------------------


def test_the_httpx2_model_pool_never_makes_a_turn_wait_for_a_connection() -> None:
    """Made outside an asyncio loop the client uses httpx2's pool (on asyncio, aiohttp's: see
    tests/provider/test_aiohttp_transport.py, 120 turns at once)."""
    client = make_openai_client(base_url="http://127.0.0.1:9/v1", api_key=None)
    pool = client._client._transport._pool  # type: ignore[attr-defined]
    assert pool._max_connections > 10**6  # not the SDK's 1,000: turns beyond it timed out waiting for the pool
    assert pool._max_keepalive_connections == 100


def test_the_cap_is_lowered_to_fit_the_open_file_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import resource

    from acp_server.daemon.server import fd_limited_connections

    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 4096))
    with caplog.at_level(logging.WARNING):
        # (256 - 64 reserved - 128 for one accept burst) / 2: the other half for model connections
        assert fd_limited_connections(1024) == 32
        assert fd_limited_connections(20) == 20
    assert [r.getMessage() for r in caplog.records] == [
        "--max-connections 1024 lowered to 32: the open-file limit is 256 (raise it with ulimit -n)"
    ]


LOW_FD_LIMIT = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); "
    "os.execv(sys.executable, [sys.executable, '-m', 'acp_server', 'serve', '--offline', '--port', '0'])"
)


@pytest.mark.e2e
async def test_a_daemon_out_of_descriptors_still_answers_health_and_logs_little() -> None:
    """The reported flood: 1,100 half-sent connections against a daemon whose open-file limit is 256."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    process = await anyio.open_process([sys.executable, "-c", LOW_FD_LIMIT], env=env, stdin=subprocess.DEVNULL)
    stderr = bytearray()
    async with process:
        try:
            assert process.stderr is not None
            with anyio.fail_after(20):
                async for chunk in process.stderr:
                    stderr += chunk
                    found = re.search(re.escape(ANNOUNCE_PREFIX.encode()) + rb"(\S+)\n", bytes(stderr))
                    if found:
                        url = found.group(1).decode()
                        break
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(1100):
                    stream = await stack.enter_async_context(raw(url))
                    await stream.send(b"GET /capabilities HTTP/1.1\r\nHost: 1")
                with anyio.fail_after(10):
                    assert await get_health_within_tries(url, 5) == 200
        finally:
            process.terminate()
            with anyio.fail_after(15):
                await process.wait()
            with anyio.move_on_after(5):
                async for chunk in process.stderr:  # type: ignore[union-attr]
                    stderr += chunk
    log = stderr.decode(errors="replace")
    assert "lowered to 32" in log
    assert log.count("Traceback") == 0 and len(log) < 64 * 1024, log[-2000:]
