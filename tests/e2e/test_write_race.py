"""A racing rename does not escape confinement: while the permission request of ``write_file sub/new.txt`` is
pending, the editor (the official ACP SDK's client) swaps ``sub`` for a symbolic link to a directory outside the
project, then allows the write; the call fails with a precise error and nothing is created outside."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from acp import spawn_agent_process
from acp.schema import ToolCallProgress

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

from ._hardening import Editor, capabilities

pytestmark = pytest.mark.anyio


async def test_a_directory_swapped_while_the_permission_is_pending_does_not_redirect_the_write(
    tmp_path: Path,
) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "sub").mkdir(parents=True)
    outside.mkdir()

    def swap() -> None:
        os.rename(project / "sub", project / "sub.moved")
        os.symlink(outside, project / "sub")

    editor = Editor(on_permission=swap)
    async with LoopbackModel() as model:
        call = ScriptedCall("write_file", {"path": "sub/new.txt", "content": "planted\n"}, id="w1")
        model.enqueue(ToolCalls((call,)), Answer(text="done", reasoning=""))
        args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--no-persist"]
        async with spawn_agent_process(editor, sys.executable, *args) as (conn, _process):
            await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=False))
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            with anyio.fail_after(30):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("write it")])
    assert len(editor.permission_requests) == 1  # the swap happened while the request was pending
    assert os.listdir(outside) == []
    final = [u for u in editor.updates if isinstance(u, ToolCallProgress) and u.status in ("completed", "failed")]
    assert [u.status for u in final] == ["failed"]
    told = [m["content"] for m in model.requests[1].messages if m.get("role") == "tool"]
    assert told == [
        "Error: cannot write sub/new.txt: sub changed after the call was checked (it is now a symbolic link, no "
        "longer the directory inside the project it was); nothing was done"
    ]
