"""The stdio face stops reading while its answers pile up unread: what it buffers for a client stays bounded."""

from __future__ import annotations

import json

import anyio
import pytest

from acp_server.bridge import SessionBridge
from acp_server.cli._stdio import serve_connection
from acp_server.config import Settings
from acp_server.domain import Emit, Prompt, StopReason

pytestmark = pytest.mark.anyio

REQUESTS = 400
METHOD = "x" * 20_000  # every "method not found" answer echoes it: ~40 KB of answers per 20 KB request


async def _never_runs(session: object, prompt: Prompt, emit: Emit, client: object = None, /) -> StopReason:
    raise AssertionError("no prompt is sent in this test")


async def test_reading_waits_while_the_answers_are_not_read() -> None:
    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": METHOD}).encode() + b"\n" for i in range(REQUESTS)]
    consumed = 0
    reader_may_go = anyio.Event()
    received: list[bytes] = []
    stalled = anyio.Event()
    all_answered = anyio.Event()

    async def receive() -> bytes:
        nonlocal consumed
        if consumed == len(lines):
            await anyio.sleep_forever()
        consumed += 1
        return lines[consumed - 1]

    async def send(data: bytes) -> None:
        if not reader_may_go.is_set():
            stalled.set()
            await reader_may_go.wait()  # the client does not read its stdout
        received.append(data)
        if sum(chunk.count(b"\n") for chunk in received) >= REQUESTS:
            all_answered.set()

    stop = anyio.Event()
    async with SessionBridge(_never_runs) as bridge, anyio.create_task_group() as tg:
        tg.start_soon(serve_connection, bridge, receive, send, Settings(), tg, stop)
        await stalled.wait()
        await anyio.wait_all_tasks_blocked()
        held = consumed
        assert held < REQUESTS // 4, f"read {held} of {REQUESTS} requests although no answer was read"
        reader_may_go.set()
        with anyio.fail_after(10):
            await all_answered.wait()
        assert consumed == REQUESTS
        stop.set()
    answers = [json.loads(line) for chunk in received for line in chunk.splitlines()]
    assert sorted(a["id"] for a in answers) == list(range(REQUESTS))
    assert {a["error"]["code"] for a in answers} == {-32601}
