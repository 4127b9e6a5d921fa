"""The bounded HTTP client of an MCP connection (``tools/_mcp_http``), against a real HTTP server on 127.0.0.1 that
answers one raw response: an event stream is bounded per event (not in all: a long stream of small events is read
whole), and a compressed body is refused (the bound is on what memory holds)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import SocketStream

from acp_server.mcp._http import MessageTooLargeError, bounded_http_client
from acp_server.mcp._stdio import MAX_MESSAGE_BYTES

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _answering(head: bytes, body: Iterable[bytes]) -> AsyncIterator[str]:
    """A server whose every request is answered ``head`` then ``body`` (closed after it); its URL."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")

    async def answer(stream: SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            await stream.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + head + b"\r\n")
            for chunk in body:
                await stream.send(chunk)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/mcp"
        tg.cancel_scope.cancel()


async def _read(url: str, told: list[str]) -> int:
    async with bounded_http_client(on_too_large=told.append) as client, client.stream("GET", url) as response:
        return sum([len(chunk) async for chunk in response.aiter_bytes()])


def _lines(count: int, line: bytes) -> Iterable[bytes]:
    for _ in range(count):
        yield line


async def test_an_event_stream_is_bounded_per_event() -> None:
    line = b"data: " + b"x" * 1018 + b"\n"  # 1 KiB a line
    count = MAX_MESSAGE_BYTES // len(line) + 64  # a little over the bound in all
    head = b"Content-Type: text/event-stream\r\n"
    told: list[str] = []
    async with _answering(head, _lines(count, line + b"\n")) as url:  # each line its own event
        assert await _read(url, told) == count * (len(line) + 1) and told == []
    async with _answering(head, _lines(count, line)) as url:  # one event of many lines
        with pytest.raises(MessageTooLargeError, match=f"over {MAX_MESSAGE_BYTES} bytes"):
            await _read(url, told)
    assert told == [f"it sent a message over {MAX_MESSAGE_BYTES} bytes"]


async def test_a_compressed_body_is_refused() -> None:
    body = gzip.compress(b"{}" * 1000)
    head = b"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
    told: list[str] = []
    async with _answering(head, [body]) as url:
        with pytest.raises(MessageTooLargeError, match="compressed"):
            await _read(url, told)
    assert told == ["it sent a compressed body (asked for none)"]


async def test_what_is_asked_for_is_unencoded() -> None:
    client = bounded_http_client({"X-Token": "t"}, on_too_large=lambda _: None)
    assert client.headers["accept-encoding"] == "identity" and client.headers["x-token"] == "t"
    await client.aclose()


async def test_the_proxy_the_environment_names_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """As with the SDK's own client: bounding the bodies keeps httpx's transports, proxies from the environment
    included (the server here answers as the proxy for a host that does not exist)."""
    told: list[str] = []
    async with _answering(b"Content-Type: application/json\r\n", [b"{}"]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.removesuffix("/mcp"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert await _read("http://mcp.example.invalid/mcp", told) == 2 and told == []
