"""The listening socket: TCP with Nagle off on accepted connections, IPv6 URLs, errors named."""

from __future__ import annotations

import json
import socket

import anyio
import pytest
import uvicorn

from acp_server.daemon import ListenError, bind_socket, url_of

from ._support import running_daemon

pytestmark = pytest.mark.anyio


def test_the_listener_says_tcp_so_asyncio_disables_nagle_on_accepted_sockets() -> None:
    with bind_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
        assert url_of(sock).startswith("http://127.0.0.1:")


def test_ipv6_loopback_url_is_bracketed() -> None:
    try:
        sock = bind_socket("::1", 0)
    except ListenError:
        pytest.skip("no IPv6 loopback on this machine")
    with sock:
        assert url_of(sock).startswith("http://[::1]:")


def test_a_busy_address_is_a_listen_error_naming_it() -> None:
    with bind_socket("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_socket("127.0.0.1", port)


async def test_keep_alive_requests_are_not_held_by_delayed_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    # With Nagle on, each keep-alive response waited ~40 ms for the client's delayed ACK: 20 requests took ~0.9 s.
    # The accepted connection's own option says so, whatever the machine's speed.
    accepted: list[socket.socket] = []
    accept = socket.socket.accept

    def recording(self: socket.socket) -> tuple[socket.socket, object]:
        conn, address = accept(self)
        accepted.append(conn)
        return conn, address

    monkeypatch.setattr(socket.socket, "accept", recording)
    async with running_daemon(None) as served:
        for _ in range(3):
            assert (await served.client.get("/health")).status_code == 200
        assert len(accepted) == 1  # one keep-alive connection
        assert accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


async def test_an_idle_daemon_sleeps_between_ticks_and_still_dates_its_responses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # uvicorn's own loop wakes ten times a second; in phase with the 0.1 s poll of anyio's
    # wait_all_tasks_blocked it made the server task look runnable at every look (a test hung on it).
    ticks: list[int] = []
    on_tick = uvicorn.Server.on_tick

    async def counting(self: uvicorn.Server, counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(self, counter)

    monkeypatch.setattr(uvicorn.Server, "on_tick", counting)
    async with running_daemon(None) as served:
        response = await served.client.get("/health")
        assert response.headers["date"].endswith(" GMT")
        began = len(ticks)
        await anyio.sleep(0.5)  # a measurement over time, not a wait for something
        assert len(ticks) - began <= 1
        for _ in range(20):
            with anyio.fail_after(5):
                await anyio.wait_all_tasks_blocked()


async def test_a_prior_knowledge_http2_connection_is_refused_as_http11() -> None:
    """The daemon serves HTTP/1.1 and WebSocket only (HTTP/2 is the proxy's in front): a client that opens with the
    HTTP/2 preface — here split across two writes — gets one 400 saying so and the connection closes (h11 alone took
    ``PRI * HTTP/2.0`` for a request and answered it and the rest of the preface mixed on one connection)."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    async with running_daemon(None) as served:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        async with await anyio.connect_tcp(host, int(port)) as stream:
            await stream.send(preface[:5])
            await anyio.wait_all_tasks_blocked()
            await stream.send(preface[5:])
            answer = b""
            with anyio.fail_after(10):
                try:
                    while True:
                        answer += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"connection: close" in head.lower(), answer
    assert json.loads(body)["code"] == "invalid_request" and b"HTTP/2 is not served here" in body, answer
