"""A tools re-listing is bounded like the prompts' listings: a server that never answers it keeps its last list (the
request ends at the request timeout), one that answers an error keeps its tools up; both logged. A raw JSON-RPC
server, on trio's mock clock (time moves only when the test jumps it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import trio.lowlevel
import trio.testing

from acp_server.mcp import parse_mcp_servers
from acp_server.mcp._connection import RELIST_INTERVAL_S, McpConnection

from .test_names import raw_server

pytestmark = pytest.mark.anyio

TIMEOUT_S = 60.0


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return ("trio", {"clock": trio.testing.MockClock()})  # rate 0: time moves only when the test jumps it


async def _listings(connection: McpConnection) -> int:
    result = await connection.call("listings", {}, timeout_s=TIMEOUT_S)
    return int(result.content[0].text)  # type: ignore[union-attr]


async def _until(connection: McpConnection, condition: Callable[[], bool]) -> None:
    """Round trips to the server until ``condition`` holds (bounded): each lets the connection handle what came."""
    for _ in range(200):
        if condition():
            return
        await _listings(connection)
    raise AssertionError("condition not met")


@pytest.mark.parametrize("mode", ["relist_hang", "relist_error"])
async def test_a_failed_tools_relisting_keeps_the_last_list_and_the_server_up(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="acp_server.mcp")
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    config = parse_mcp_servers([raw_server(mode)])[0]
    connection = McpConnection(config, str(tmp_path), lambda _: None, request_timeout_s=TIMEOUT_S)
    async with anyio.create_task_group() as tg:
        connection.start(tg)
        try:
            await connection.ready.wait()
            before = connection.tools
            assert [tool.name for tool in before] == ["touch", "listings"]
            await connection.call("touch", {}, timeout_s=TIMEOUT_S)  # tools/list_changed
            clock.jump(RELIST_INTERVAL_S)
            for _ in range(200):  # until the re-listing is asked for
                if await _listings(connection) == 2:
                    break
            else:
                raise AssertionError("the tools were not listed again")
            if mode == "relist_hang":
                clock.jump(TIMEOUT_S)  # its answer never comes
            await _until(connection, lambda: "tools not re-listed" in caplog.text)
            assert connection.up and connection.tools == before
            reason = "no answer within 60 s" if mode == "relist_hang" else "listing broke"
            assert f"mcp raw: tools not re-listed ({reason}); the last list stays" in caplog.text
            assert (await connection.call("touch", {}, timeout_s=TIMEOUT_S)).isError is not True
        finally:
            clock.autojump_threshold = 0  # let the server's stop run its grace periods
            connection.close()
            await connection.ended.wait()
