"""A spawned ``acp-server`` for benchmarks: raw NDJSON over its real pipes, messages parsed as they arrive."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import Process

from acp_server.rpc import iter_lines


class AgentPipe:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        stdout = process.stdout

        async def receive() -> bytes:
            try:
                return await stdout.receive()
            except anyio.EndOfStream:
                return b""

        self._lines = iter_lines(receive, 1 << 30)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        async for line in self._lines:
            assert isinstance(line, bytes)
            yield json.loads(line)

    async def reply(self, msg_id: Any) -> dict[str, Any]:
        """Read until the response to ``msg_id`` (other messages are dropped)."""
        async for message in self.messages():
            if message.get("id") == msg_id and "method" not in message:
                return message
        raise RuntimeError("acp-server exited")

    async def call(self, msg_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.reply(msg_id)

    async def new_session(self) -> str:
        await self.call("init", "initialize", {"protocolVersion": 1})
        return str((await self.call("new", "session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"])


@asynccontextmanager
async def spawn(*args: str) -> AsyncIterator[AgentPipe]:
    """``acp-server ARGS --log-level ERROR``, with stdin closed and the process awaited on exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="acp-bench-")  # a benchmark never writes the user's sessions
    command = [sys.executable, "-m", "acp_server", *args, "--log-level", "ERROR"]
    async with await anyio.open_process(command, env=env, stderr=None) as process:
        yield AgentPipe(process)
        assert process.stdin is not None
        await process.stdin.aclose()
        await process.wait()
