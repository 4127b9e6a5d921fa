"""The stdio transport of an MCP connection: the server as a child process, newline-delimited JSON-RPC over its pipes.

The SDK's ``ClientSession`` runs on the streams this yields (``SessionMessage`` in, ``SessionMessage | Exception``
out), as on the SDK's own ``stdio_client``; this one adds what an agent needs of a third-party process:

- the server runs in its own process group, in the session's cwd; on exit (also under cancellation: the cleanup is
  shielded and bounded) its stdin is closed, then the group gets SIGTERM after a grace, SIGKILL after another, and
  the process is reaped. Whatever the group left behind is killed too. Nothing is left running.
- the agent's death, however it dies (kill -9 included), kills the group: it has the watchdog of a local command
  (:func:`~acp_server.tools.watched_group`), and the server starts only once its watchdog does (:data:`_GATE`).
  Out of reach, as for commands: a child that leaves the group (``setsid``).
- a message is at most :data:`MAX_MESSAGE_BYTES`; a longer line ends the connection (memory stays bounded whatever
  the server sends).
- its stderr is drained line by line into the agent's log (prefixed with the server's name, lines cut at 2 KiB),
  never into stdout, and never blocks the server; the log takes :data:`STDERR_BURST` lines at once, then
  :data:`STDERR_PER_S` a second, per server: the others are dropped and their count logged.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import anyio
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..tools import watched_group

__all__ = ["MAX_MESSAGE_BYTES", "STDERR_BURST", "STDERR_PER_S", "STOP_GRACE_S", "stdio_transport"]

logger = logging.getLogger("acp_server.mcp")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest message (one line) a stdio server may send."""

STOP_GRACE_S = 2.0
"""How long a stopping server has after its stdin closes (then SIGTERM), and after SIGTERM (then SIGKILL)."""

_MAX_STDERR_LINE = 2048
STDERR_BURST = 100
"""Lines of a server's stderr the log takes at once (then :data:`STDERR_PER_S` a second; the others are counted)."""
STDERR_PER_S = 10
_MAX_BAD_LINES_LOGGED = 5


_GATE = 'read -r _ && exec "$@"'
"""The shell that becomes the server (same pid: the group's leader) waits for one line on stdin, which the agent
sends once the watchdog is started (end of file, when the agent died before, runs nothing). ``read`` takes one byte
at a time from a pipe: the server's messages after that line are the server's."""


def _check_command(command: str, env: Mapping[str, str], cwd: str) -> None:
    """Raise ``FileNotFoundError`` (or ``PermissionError``) for a command that cannot run, as starting it would,
    before the gate's shell is started (whose ``exec`` would fail later, less clearly)."""
    if "/" in command:
        path = os.path.join(cwd, command)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    elif shutil.which(command, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


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


class _LogBudget:
    """A server's stderr lines the log takes: :data:`STDERR_BURST` at once, then :data:`STDERR_PER_S` a second (a
    token bucket); the others are counted, and the count is logged before the next line logged, or at the end."""

    __slots__ = ("_at", "_tokens", "dropped", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._tokens = float(STDERR_BURST)
        self._at = anyio.current_time()
        self.dropped = 0

    def line(self, text: str) -> None:
        now = anyio.current_time()
        self._tokens = min(float(STDERR_BURST), self._tokens + (now - self._at) * STDERR_PER_S)
        self._at = now
        if self._tokens < 1:
            self.dropped += 1
            return
        self._tokens -= 1
        self.report()
        logger.info("mcp %s (stderr): %s", self.name, text)

    def report(self) -> None:
        if self.dropped:
            logger.info("mcp %s (stderr): %d lines dropped (over %d a second)", self.name, self.dropped, STDERR_PER_S)
            self.dropped = 0


async def _drain_stderr(stream: ByteReceiveStream, name: str) -> None:
    buffered = BufferedByteReceiveStream(stream)
    budget = _LogBudget(name)
    pending = b""
    try:
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                chunk = await buffered.receive(65536)
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()[-_MAX_STDERR_LINE:]
                for line in lines:
                    if line.strip():
                        budget.line(line[:_MAX_STDERR_LINE].decode("utf-8", "replace").rstrip())
    finally:
        budget.report()  # also when cancelled: the count is never lost


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
    _check_command(command, env, cwd)
    with anyio.CancelScope(shield=True):  # a cancel must not leave a started process without its handle
        process = await anyio.open_process(
            ["/bin/sh", "-c", _GATE, "sh", command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,  # its own group: the process is its leader
        )
    try:
        async with watched_group(process.pid, cwd):
            assert process.stdin is not None
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await process.stdin.send(b"\n")  # the gate: the server runs once its watchdog does
            async with _serving(name, process, on_exit) as streams:
                yield streams
    finally:
        if process.returncode is None:  # stopped before it served (else _serving stopped it)
            await _stop(process)


@asynccontextmanager
async def _serving(
    name: str, process: Process, on_exit: Callable[[str], None]
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[object], MemoryObjectSendStream[object]]]:
    """The started ``process``'s messages, until it ends; stopped and its pipes read to their end on the way out."""
    from mcp import types
    from mcp.shared.message import SessionMessage

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
