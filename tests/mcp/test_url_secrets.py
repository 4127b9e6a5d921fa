"""An MCP server's URL query (and userinfo) is a secret: the error the client is told and every log line, at every
level the agent writes (an HTTP library's lines included), show the URL without them. A raw HTTP server refuses
every request with 401; the URL carries a key in its query and a password in its userinfo."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.abc import SocketStream

from acp_server.cli._logging import _Redact
from acp_server.mcp import parse_mcp_servers
from acp_server.urls import public_url, without_url_secrets

from .test_servers import connected

pytestmark = pytest.mark.anyio

KEY = "k3y-in-the-query"
PASSWORD = "pa55word"


@asynccontextmanager
async def _refusing() -> AsyncIterator[int]:
    """A server that answers every request 401; its port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")

    async def answer(stream: SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            await stream.send(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


def test_a_url_is_shown_without_userinfo_query_and_fragment() -> None:
    assert public_url("https://user:p@ss@host:8/mcp?key=s#frag") == "https://host:8/mcp"
    said = "Client error '401' for url 'http://u:p@h/mcp?key=s'\nHTTP Request: POST http://h/x?a=b \"HTTP/1.1 401\""
    assert (
        without_url_secrets(said)
        == "Client error '401' for url 'http://h/mcp'\nHTTP Request: POST http://h/x \"HTTP/1.1 401\""
    )


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_neither_the_clients_error_nor_a_log_line_shows_the_urls_secrets(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with _refusing() as port:
        url = f"http://user:{PASSWORD}@127.0.0.1:{port}/mcp?key={KEY}"
        [config] = parse_mcp_servers([{"type": kind, "name": "web", "url": url, "headers": []}])
        assert KEY not in repr(config) and PASSWORD not in repr(config)
        async with connected(tmp_path, config.to_acp()) as (_, mcp):
            [state] = mcp.status()
    assert state["status"] == "failed"
    assert "401" in state["error"] and KEY not in state["error"] and PASSWORD not in state["error"]
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("acp_server")]
    assert ours and not [line for line in ours if KEY in line or PASSWORD in line]
    redact = _Redact(())  # the agent's log handler's filter: every record, any library's, at every level
    for record in caplog.records:
        redact.filter(record)
        assert KEY not in record.getMessage() and PASSWORD not in record.getMessage()
