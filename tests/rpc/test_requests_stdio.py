"""A request to the client over a real stdio pipe: a subprocess runs a dispatcher on its stdin/stdout (NDJSON), asks
the test (the client) while handling a request, gets the answer; at EOF the request still waiting fails."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

AGENT = """
import anyio
from acp_server.errors import RemoteError
from acp_server.rpc import Dispatcher, Outbox, decode_line, iter_lines, open_stdio

async def main() -> None:
    outbox = Outbox()
    dispatcher = Dispatcher(outbox)

    async def ask(params, peer):
        await peer.notify("session/update", {"before": params["path"]})
        try:
            return {"got": await peer.request("fs/read_text_file", params)}
        except RemoteError as failure:
            return {"failed": str(failure), "code": failure.code}

    dispatcher.register({"ask": ask}, {})
    async with open_stdio() as io, anyio.create_task_group() as tg:
        tg.start_soon(outbox.pump, io.send)
        async for line in iter_lines(io.receive, 1 << 20):
            dispatcher.feed(decode_line(line))
        await dispatcher.aclose(5)  # stdin ended: no answer can come any more
        await outbox.wait_empty()
        outbox.close()

anyio.run(main)
"""


class Pipe:
    def __init__(self, process: Process) -> None:
        self.process = process
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(10):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


async def test_a_request_to_the_client_over_a_pipe_is_answered_and_one_pending_at_eof_fails() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    async with await anyio.open_process([sys.executable, "-c", AGENT], env=env, stderr=None) as process:
        pipe = Pipe(process)
        await pipe.send({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": {"path": "/a"}})
        note, asked = await pipe.receive(), await pipe.receive()
        assert note == {"jsonrpc": "2.0", "method": "session/update", "params": {"before": "/a"}}
        assert asked["method"] == "fs/read_text_file" and asked["params"] == {"path": "/a"}
        await pipe.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "A"}})
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"got": {"content": "A"}}}

        await pipe.send({"jsonrpc": "2.0", "id": 2, "method": "ask", "params": {"path": "/b"}})
        await pipe.receive()
        asked = await pipe.receive()
        await pipe.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32002, "message": "no /b"}})
        failed = {"failed": "fs/read_text_file failed: no /b", "code": -32002}
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 2, "result": failed}

        await pipe.send({"jsonrpc": "2.0", "id": 3, "method": "ask", "params": {"path": "/c"}})
        await pipe.receive()
        await pipe.receive()  # asked, never answered: the client goes away
        assert process.stdin is not None
        await process.stdin.aclose()
        closed = {"failed": "connection closed before the client answered fs/read_text_file", "code": None}
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 3, "result": closed}
        with anyio.fail_after(10):
            assert await process.wait() == 0
