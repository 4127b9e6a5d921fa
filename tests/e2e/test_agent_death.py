"""No command outlives the agent: kill -9 of a real agent process mid-command, with a command that sleeps and one
that ignores SIGTERM; the shell and the child it started must both end (the official ACP SDK is the editor)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import anyio
import pytest
from acp import spawn_agent_process

from acp_server.provider.offline import LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

from ._hardening import BYPASS, Editor, capabilities, eventually, exited, kill_quietly

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "prefix", ["", "trap '' TERM; "], ids=["sleep-300", "ignoring-sigterm"]
)
async def test_a_command_dies_with_a_kill_9_agent(tmp_path: Path, prefix: str) -> None:
    pid_file = tmp_path / "pids"
    command = f"{prefix}sleep 300 & echo $$ $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait"
    pids: list[int] = []
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("run_command", {"command": command}, id="c1"),)))
        args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--no-persist", *BYPASS]
        try:
            async with spawn_agent_process(Editor(), sys.executable, *args) as (conn, process):
                await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=False))
                session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                async with anyio.create_task_group() as tg:

                    async def prompt() -> None:
                        with contextlib.suppress(Exception):
                            await conn.prompt(session_id=session.session_id, prompt=[text_block("sleep")])

                    tg.start_soon(prompt)
                    await eventually(pid_file.exists)
                    pids = [int(pid) for pid in pid_file.read_text().split()]
                    process.kill()  # SIGKILL: no cleanup code of the agent runs
                    await process.wait()
                    tg.cancel_scope.cancel()
            survivors = [pid for pid in pids if not await exited(pid)]
            assert survivors == [], f"still running after the agent died: {survivors} of {pids}"
        finally:
            for pid in pids:
                kill_quietly(pid)  # without the fix the test cleans up its own mess
    assert len(pids) == 2
