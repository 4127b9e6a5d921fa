"""stdin/stdout as an NDJSON byte transport (asyncio pipes; a thread for regular files and terminals)."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import BinaryIO

import anyio

__all__ = ["StdioStreams", "open_stdio"]

_READ_SIZE = 1 << 16


@dataclass
class StdioStreams:
    """``receive()`` returns b"" at EOF; ``send(data)`` writes all of it and waits for the pipe to drain."""

    receive: Callable[[], Awaitable[bytes]]
    send: Callable[[bytes], Awaitable[None]]


def _is_pipe_like(fileno: int) -> bool:
    mode = os.fstat(fileno).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@asynccontextmanager
async def open_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> AsyncIterator[StdioStreams]:
    """Wrap the process' stdin/stdout (or the given binary files) as async byte streams."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    loop = asyncio.get_running_loop()
    transports: list[asyncio.BaseTransport] = []

    raw_in: BinaryIO | None = None
    if _is_pipe_like(stdin.fileno()):
        reader = asyncio.StreamReader(limit=_READ_SIZE * 4)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        transports.append(read_transport)

        async def receive() -> bytes:
            return await reader.read(_READ_SIZE)
    else:
        raw_in = os.fdopen(os.dup(stdin.fileno()), "rb", buffering=0)

        async def receive() -> bytes:
            return await anyio.to_thread.run_sync(raw_in.read, _READ_SIZE, abandon_on_cancel=True) or b""

    if _is_pipe_like(stdout.fileno()):
        write_transport, write_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        transports.append(write_transport)

        async def send(data: bytes) -> None:
            writer.write(data)
            await writer.drain()
    else:

        def _write_all(data: bytes) -> None:
            stdout.write(data)
            stdout.flush()

        async def send(data: bytes) -> None:
            await anyio.to_thread.run_sync(_write_all, data)

    try:
        yield StdioStreams(receive, send)
    finally:
        for transport in transports:
            transport.close()
        if raw_in is not None:
            raw_in.close()
