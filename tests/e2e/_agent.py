"""A raw NDJSON client for a real ``acp-server`` subprocess: bytes in, parsed lines out, stderr kept for asserts."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from acp_server.daemon import ANNOUNCE_PREFIX
from acp_server.rpc import iter_lines

COMMAND = [sys.executable, "-m", "acp_server"]


class AgentProcess:
    """Drives one server process. Every stdout line is recorded raw (``stdout_lines``) before it is parsed."""

    def __init__(self, process: Process, tg: TaskGroup, *, read_stderr: bool = True) -> None:
        self.process = process
        self.stdout_lines: list[bytes] = []
        self.stderr = bytearray()
        self._next_id = 1000
        send, self._received = anyio.create_memory_object_stream[dict[str, Any]](10_000)
        tg.start_soon(self._read_stdout, send)
        if read_stderr:
            tg.start_soon(self._read_stderr)

    async def _read_stdout(self, send: Any) -> None:
        assert self.process.stdout is not None
        stdout = self.process.stdout

        async def receive() -> bytes:
            try:
                return await stdout.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return b""

        async with send:
            async for line in iter_lines(receive, 1 << 30):
                assert isinstance(line, bytes)
                self.stdout_lines.append(line)
                await send.send(json.loads(line))

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            async for chunk in self.process.stderr:
                self.stderr += chunk
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def request_nowait(self, method: str, params: Any = None) -> int:
        msg_id = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return msg_id

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def receive(self, timeout: float = 10.0) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await self._received.receive()

    async def until_response(self, msg_id: Any, timeout: float = 10.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read until the response to ``msg_id``; returns it and the other messages seen before it."""
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(timeout):
            while True:
                message = await self._received.receive()
                if "method" not in message and message.get("id") == msg_id:
                    return message, seen
                seen.append(message)

    async def request(self, method: str, params: Any = None, timeout: float = 10.0) -> dict[str, Any]:
        response, _ = await self.until_response(await self.request_nowait(method, params), timeout)
        return response

    async def initialize(self) -> dict[str, Any]:
        return await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    async def new_session(self, cwd: str = "/tmp") -> str:
        response = await self.request("session/new", {"cwd": cwd, "mcpServers": []})
        assert "result" in response, (response, self.stderr[-2000:])
        session_id = str(response["result"]["sessionId"])
        await self.commands_update(session_id)
        return session_id

    async def commands_update(self, session_id: str) -> dict[str, Any]:
        """The next message, which must be the session's ``available_commands_update`` (it follows the answer of
        ``session/new``, ``load``, ``resume`` and ``fork`` at once)."""
        message = await self.receive()
        assert message.get("method") == "session/update", message
        assert message["params"]["sessionId"] == session_id, message
        assert message["params"]["update"]["sessionUpdate"] == "available_commands_update", message
        return message

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()


@asynccontextmanager
async def spawn_agent(
    *args: str,
    env: dict[str, str] | None = None,
    read_stderr: bool = True,
    command: Sequence[str] = COMMAND,
    cwd: str | None = None,
) -> AsyncIterator[AgentProcess]:
    """Start ``acp-server`` with ``args``; on exit close stdin, wait (bounded) and kill if needed.

    ``read_stderr=False`` leaves stderr a pipe nobody reads (like the official SDK's ``spawn_agent_process``);
    ``command`` runs the agent another way (e.g. ``uvx --from WHEEL acp-server``)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    full_env.update(env or {})
    async with anyio.create_task_group() as tg:
        process = await anyio.open_process([*command, *args], env=full_env, cwd=cwd)
        agent = AgentProcess(process, tg, read_stderr=read_stderr)
        try:
            yield agent
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await agent.close_stdin()
                    with anyio.move_on_after(10):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                await process.aclose()
            agent._received.close()
            tg.cancel_scope.cancel()


async def announced_url(process: Process, timeout_s: float = 30) -> str:
    """The URL a ``serve`` process announces on stderr (read up to that line; fails the test after ``timeout_s``)."""
    assert process.stderr is not None
    seen = b""
    with anyio.fail_after(timeout_s):
        async for chunk in process.stderr:
            seen += chunk
            for line in seen.decode(errors="replace").splitlines():
                if line.startswith(ANNOUNCE_PREFIX):
                    return line[len(ANNOUNCE_PREFIX) :].strip()
    raise AssertionError(f"no URL line: {seen.decode(errors='replace')}")
