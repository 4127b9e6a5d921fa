"""``additionalDirectories`` end to end, over real pipes, with the official ACP SDK as the editor: the agent
advertises it; a session made with an additional directory writes a file there (with permission) and reads one back,
a write outside every root is refused without asking, the model is told the directory in its environment, and
``session/list`` reports the list, also after the agent restarts on the same store and the session is resumed with
another list."""

from __future__ import annotations

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


async def test_a_file_is_written_into_an_additional_directory_and_refused_outside(tmp_path: Path) -> None:
    project, extra, outside = tmp_path / "project", tmp_path / "extra", tmp_path / "outside"
    for directory in (project, extra, outside):
        directory.mkdir()
    (extra / "notes.txt").write_text("shared notes\n")
    editor = Editor()
    store = tmp_path / "state"
    async with LoopbackModel() as model:
        calls = (
            ScriptedCall("write_file", {"path": str(extra / "made.txt"), "content": "from the agent\n"}, id="w1"),
            ScriptedCall("write_file", {"path": str(outside / "planted.txt"), "content": "no\n"}, id="w2"),
            ScriptedCall("read_file", {"path": str(extra / "notes.txt")}, id="r1"),
        )
        model.enqueue(ToolCalls(calls), Answer(text="done", reasoning=""))
        args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--state-dir", str(store)]
        async with spawn_agent_process(editor, sys.executable, *args) as (conn, _process):
            init = await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=False))
            assert init.agent_capabilities is not None
            session_caps = init.agent_capabilities.session_capabilities
            assert session_caps is not None and session_caps.additional_directories is not None
            session = await conn.new_session(cwd=str(project), mcp_servers=[], additional_directories=[str(extra)])
            with anyio.fail_after(30):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("write it")])
            listed = await conn.list_sessions()
            assert [(info.session_id, info.additional_directories) for info in listed.sessions] == [
                (session.session_id, [str(extra)])
            ]
    assert (extra / "made.txt").read_text() == "from the agent\n"
    assert list(outside.iterdir()) == []
    assert [call.tool_call_id for call in editor.permission_requests] == ["w1"]  # the refused one never asked
    final = {u.tool_call_id: u.status for u in editor.updates if isinstance(u, ToolCallProgress) and u.status}
    assert final == {"w1": "completed", "w2": "failed", "r1": "completed"}
    told = [m["content"] for m in model.requests[1].messages if m.get("role") == "tool"]
    assert told[0].startswith(f"Created {extra / 'made.txt'}")
    assert told[1] == (
        f"Error: path '{outside / 'planted.txt'}' is outside the project directory {project} and the additional "
        f"directories ({extra})"
    )
    assert "shared notes" in told[2]
    system = model.requests[0].messages[0]["content"]
    assert f"  - {extra}" in system and "Additional directories" in system

    async with LoopbackModel() as model:  # a restart on the same store: the list was stored with the session
        args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--state-dir", str(store)]
        async with spawn_agent_process(Editor(), sys.executable, *args) as (conn, _process):
            await conn.initialize(protocol_version=1, client_capabilities=capabilities(terminal=False))
            listed = await conn.list_sessions()
            assert [info.additional_directories for info in listed.sessions] == [[str(extra)]]
            await conn.resume_session(
                session_id=session.session_id, cwd=str(project), mcp_servers=[], additional_directories=[str(outside)]
            )
            listed = await conn.list_sessions()
            assert [info.additional_directories for info in listed.sessions] == [[str(outside)]]
