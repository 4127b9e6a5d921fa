"""The stdio transport of an MCP connection: the server as a child process, newline-delimited JSON-RPC over its pipes.

The SDK's ``ClientSession`` runs on the streams this yields (``SessionMessage`` in, ``SessionMessage | Exception``
out), as on the SDK's own ``stdio_client``; this one adds what an agent needs of a third-party process:

- the server runs in its own process group, in the session's cwd; on exit (also under cancellation: the cleanup is
  shielded and bounded) its stdin is closed, then the group gets SIGTERM after a grace, SIGKILL after another, and
  the process is reaped. Whatever the group left behind is killed too. Nothing is left running.
- a message is at most :data:`MAX_MESSAGE_BYTES`; a longer line ends the connection (memory stays bounded whatever
  the server sends).
- its stderr is drained line by line into the agent's log (prefixed with the server's name, lines cut at 2 KiB),
  never into stdout, and never blocks the server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import anyio
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["MAX_MESSAGE_BYTES", "STOP_GRACE_S", "stdio_transport"]

logger = logging.getLogger("acp_server.mcp")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest message (one line) a stdio server may send."""

STOP_GRACE_S = 2.0
"""How long a stopping server has after its stdin closes (then SIGTERM), and after SIGTERM (then SIGKILL)."""

_MAX_STDERR_LINE = 2048
_MAX_BAD_LINES_LOGGED = 5


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _stop(process: Process) -> None:
    """Close stdin, wait, SIGTERM the group, wait, SIGKILL it, reap; then kill what the group left. Shielded."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                await process.stdin.aclose()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with anyio.move_on_after(STOP_GRACE_S):
                await process.wait()
                break
            _signal_group(process.pid, sig)
        await process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # leftovers of the group (the leader is reaped)


async def _drain_stderr(stream: ByteReceiveStream, name: str) -> None:
    buffered = BufferedByteReceiveStream(stream)
    pending = b""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        while True:
            chunk = await buffered.receive(65536)
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()[-_MAX_STDERR_LINE:]
            for line in lines:
                if line.strip():
                    text = line[:_MAX_STDERR_LINE].decode("utf-8", "replace").rstrip()
                    logger.info("mcp %s (stderr): %s", name, text)


@asynccontextmanager
async def stdio_transport(
    name: str,
    command: str,
    args: tuple[str, ...],
    env: Mapping[str, str],
    cwd: str,
    on_exit: Callable[[str], None],
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[object], MemoryObjectSendStream[object]]]:
    """Start the server; yield (messages from it, messages to it). ``on_exit(reason)`` is called once when its
    output ends (it exited, closed stdout, or sent an over-long or broken line). Raises ``OSError`` when it cannot
    start."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    incoming_w, incoming_r = anyio.create_memory_object_stream[object](16)
    outgoing_w, outgoing_r = anyio.create_memory_object_stream[object](16)

    async def read() -> None:
        assert process.stdout is not None
        reason = "it closed its output (exited)"
        told, bad = False, 0
        buffered = BufferedByteReceiveStream(process.stdout)
        try:
            async with incoming_w:
                while True:
                    try:
                        line = await buffered.receive_until(b"\n", MAX_MESSAGE_BYTES)
                    except anyio.DelimiterNotFound:
                        break
                    if not line.strip():
                        continue
                    try:
                        message = types.JSONRPCMessage.model_validate_json(line)
                    except ValueError as exc:
                        bad += 1
                        if bad <= _MAX_BAD_LINES_LOGGED:
                            logger.warning("mcp %s: not a JSON-RPC message (%s)", name, str(exc)[:200])
                        await incoming_w.send(exc)
                        continue
                    await incoming_w.send(SessionMessage(message))
            told = True  # a line over the limit: the connection ends
            on_exit(f"it sent a message over {MAX_MESSAGE_BYTES} bytes")
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if not told:
                on_exit(reason)

    async def write() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with outgoing_r:
                async for item in outgoing_r:
                    assert isinstance(item, SessionMessage)
                    data = item.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send(data.encode("utf-8") + b"\n")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            assert process.stderr is not None
            tg.start_soon(_drain_stderr, process.stderr, name)
            try:
                yield incoming_r, outgoing_w
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
            for stream in (process.stdout, process.stderr):  # read to their end: unread data holds a pipe open
                with (
                    anyio.move_on_after(STOP_GRACE_S),
                    contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError),
                ):
                    while stream is not None:
                        await stream.receive()
            for resource in (incoming_r, outgoing_w, process.stdout, process.stderr):
                if resource is not None:
                    with contextlib.suppress(Exception):
                        await resource.aclose()
