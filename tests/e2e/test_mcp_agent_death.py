"""Nothing of an MCP server outlives the agent, kill -9 included: a stdio server that ignores EOF and SIGTERM, and the
child it started in its group, both end when a real agent process is killed with SIGKILL (the official ACP SDK is
the editor). Out of reach, as for commands: a child that calls ``setsid``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp import spawn_agent_process
from acp.schema import EnvVariable, McpServerStdio

from ._hardening import Editor, capabilities, eventually, exited, kill_quietly

pytestmark = pytest.mark.anyio

STUBBORN = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "stubborn_server.py")


async def test_a_stdio_server_and_its_group_die_with_a_kill_9_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    server = McpServerStdio(
        name="stubborn",
        command=sys.executable,
        args=[STUBBORN],
        env=[EnvVariable(name="PIDS_FILE", value=str(pid_file))],
    )
    pids: list[int] = []
    try:
        args = ["-m", "acp_server", "--offline", "--no-persist"]
        async with spawn_agent_process(Editor(), sys.executable, *args) as (conn, process):
            await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=False))
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
            assert session.field_meta is not None
            assert session.field_meta["acpServer"]["mcpServers"][0]["status"] == "connected"
            await eventually(pid_file.exists)
            pids = [int(pid) for pid in pid_file.read_text().split()]
            process.kill()  # SIGKILL: no cleanup code of the agent runs
            await process.wait()
        survivors = [pid for pid in pids if not await exited(pid)]
        assert survivors == [], f"still running after the agent died: {survivors} of {pids}"
    finally:
        for pid in pids:
            kill_quietly(pid)  # without the fix the test cleans up its own mess
    assert len(pids) == 2
