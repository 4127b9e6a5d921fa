"""An MCP server's stderr is rate-limited in the agent's log, per server: a burst of lines at once, then a few a
second; the lines past that are dropped and their count logged (before the next line logged, or at the end). A raw
JSON-RPC server writes 1000 lines at once, on trio's mock clock (time moves only when the test jumps it)."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest
import trio.lowlevel
import trio.testing

from acp_server.mcp import parse_mcp_servers
from acp_server.mcp._connection import McpConnection
from acp_server.mcp._stdio import STDERR_BURST, STDERR_PER_S

from .test_names import raw_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return ("trio", {"clock": trio.testing.MockClock()})


def _stderr(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("mcp raw (stderr): ")]


async def test_a_flood_of_stderr_is_rate_limited_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_server.mcp")
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    config = parse_mcp_servers([raw_server("noisy")])[0]
    connection = McpConnection(config, str(tmp_path), lambda _: None, request_timeout_s=60)
    async with anyio.create_task_group() as tg:
        connection.start(tg)
        try:
            await connection.ready.wait()
            await connection.call("noise", {"count": 1000}, timeout_s=60)
            for _ in range(200):  # round trips until the burst is logged (the rest of the lines are dropped)
                if len(_stderr(caplog)) >= STDERR_BURST:
                    break
                await connection.call("noise", {"count": 0}, timeout_s=60)
            assert _stderr(caplog) == [f"mcp raw (stderr): noise {i}" for i in range(STDERR_BURST)]
            clock.jump(1 / STDERR_PER_S)  # room for one more line
            await connection.call("noise", {"count": 1}, timeout_s=60)
            for _ in range(200):
                if len(_stderr(caplog)) >= STDERR_BURST + 2:
                    break
                await connection.call("noise", {"count": 0}, timeout_s=60)
            assert _stderr(caplog)[STDERR_BURST:] == [
                f"mcp raw (stderr): {1000 - STDERR_BURST} lines dropped (over {STDERR_PER_S} a second)",
                "mcp raw (stderr): noise 0",
            ]
        finally:
            clock.autojump_threshold = 0  # let the server's stop run its grace periods
            connection.close()
            await connection.ended.wait()
    assert len(_stderr(caplog)) == STDERR_BURST + 2  # nothing else was dropped: no count at the end
