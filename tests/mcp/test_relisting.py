"""A server that keeps telling its prompts (or its tools) changed is re-listed at most once per
:data:`RELIST_INTERVAL_S`, however many ``*/list_changed`` it sends: the notifications in between are one re-listing,
so neither the server's listings nor the editor's ``available_commands_update`` can be driven in a tight loop. The
real test server (``tests/mcp_servers/py_server.py``) over real pipes; virtual time (trio's MockClock, frozen until
the test moves it): the interval is measured exactly, nothing waits for real."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import trio.lowlevel
import trio.testing

from acp_server.mcp import parse_mcp_servers
from acp_server.mcp._connection import RELIST_INTERVAL_S, McpConnection

from .test_servers import py_server

# rate 0: time moves only when the test jumps it
pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time(autojump=None)]


async def _count(connection: McpConnection, what: str = "prompts") -> int:
    result = await connection.call("listings", {"what": what}, timeout_s=60)
    return int(result.content[0].text)  # type: ignore[union-attr]


async def test_a_flood_of_prompts_list_changed_is_one_relisting_per_interval(tmp_path: Path) -> None:
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    told: list[str] = []
    changed = anyio.Event()

    def on_prompts(connection: McpConnection) -> None:
        told.append(connection.prompts[-1].description or "" if connection.prompts else "")
        changed.set()

    config = parse_mcp_servers([py_server(env={"PY_SERVER_FLOOD": "1"})])[0]
    connection = McpConnection(config, str(tmp_path), lambda _: None, request_timeout_s=60, on_prompts=on_prompts)
    async with anyio.create_task_group() as tg:
        connection.start(tg)
        try:
            await connection.prompts_listed.wait()
            assert connection.up and await _count(connection) == 1
            changed = anyio.Event()
            for _ in range(20):  # each call returns after its notification has been handled
                await connection.call("flap", {}, timeout_s=60)
            assert await _count(connection) == 1  # within the interval: not listed again
            clock.jump(RELIST_INTERVAL_S)
            await changed.wait()
            assert await _count(connection) == 2  # the 20 notifications: one listing
            assert told[-1] == "changed 20 times"
            for _ in range(3):
                await connection.call("flap", {}, timeout_s=60)
            assert await _count(connection) == 2
        finally:
            clock.autojump_threshold = 0  # let the server's stop run its grace periods
            connection.close()
            await connection.ended.wait()


async def test_a_flood_of_tools_list_changed_is_one_relisting_per_interval(tmp_path: Path) -> None:
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    relisted = anyio.Event()
    config = parse_mcp_servers([py_server(env={"PY_SERVER_FLOOD": "1"})])[0]
    connection = McpConnection(config, str(tmp_path), lambda _: relisted.set(), request_timeout_s=60)
    async with anyio.create_task_group() as tg:
        connection.start(tg)
        try:
            await connection.ready.wait()
            assert connection.up and await _count(connection, "tools") == 1
            relisted = anyio.Event()
            for _ in range(20):
                await connection.call("touch_tools", {}, timeout_s=60)
            assert await _count(connection, "tools") == 1
            clock.jump(RELIST_INTERVAL_S)
            await relisted.wait()
            assert await _count(connection, "tools") == 2
        finally:
            clock.autojump_threshold = 0
            connection.close()
            await connection.ended.wait()
