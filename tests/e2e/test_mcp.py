"""MCP servers from the editor, end to end: the official ACP Python SDK as the editor passes ``mcpServers`` to a real
``acp-server`` process; the test MCP server on the official ``mcp`` SDK (``tests/mcp_servers/py_server.py``) runs as
the agent's child over real pipes; the scriptable loopback model calls its tools."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.schema import EnvVariable, McpServerStdio, ToolCallStart

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

from .test_tools import Editor, _alive, _capabilities, _eventually, _exited, _tool_messages

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "py_server.py")


def py_server(name: str = "py", **env: str) -> McpServerStdio:
    variables = [EnvVariable(name=key, value=value) for key, value in env.items()]
    return McpServerStdio(name=name, command=sys.executable, args=[SERVER], env=variables)


@asynccontextmanager
async def agent(editor: Editor, model: LoopbackModel, *flags: str, state: Path | None = None) -> AsyncIterator[Any]:
    args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--mcp-connect-timeout-ms", "30000"]
    args += ["--no-persist"] if state is None else ["--state-dir", str(state)]
    async with spawn_agent_process(editor, sys.executable, *args, *flags) as (conn, process):
        conn.process = process
        yield conn


async def new_session(conn: Any, cwd: Path, *servers: McpServerStdio) -> Any:
    await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
    return await conn.new_session(cwd=str(cwd), mcp_servers=list(servers))


async def test_initialize_advertises_http_and_sse(tmp_path: Path) -> None:
    async with LoopbackModel() as model, agent(Editor(), model) as conn:
        reply = await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
    mcp = reply.agent_capabilities.mcp_capabilities
    assert (mcp.http, mcp.sse) == (True, True)


async def test_the_model_calls_an_mcp_tool_beside_a_broken_server(tmp_path: Path) -> None:
    editor = Editor()
    broken = McpServerStdio(name="broken", command=str(tmp_path / "missing"), args=[], env=[])
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("mcp__py__env", {"name": "GIVEN"}, id="m1"),)),
            Answer(text="done"),
        )
        async with agent(editor, model) as conn:
            session = await new_session(conn, tmp_path, py_server(GIVEN="from the editor"), broken)
            response = await conn.prompt(session_id=session.session_id, prompt=[text_block("use the server")])
    states = {state["name"]: state for state in session.field_meta["acpServer"]["mcpServers"]}
    assert states["py"]["status"] == "connected" and states["py"]["tools"] == 11
    assert states["broken"]["status"] == "failed" and "command not found" in states["broken"]["error"]
    assert response.stop_reason == "end_turn"
    offered = model.requests[0].tool_names
    assert "read_file" in offered and "mcp__py__echo" in offered and "mcp__py__write_note" in offered
    assert not [name for name in offered if "broken" in name]
    start, *progress = editor.calls("m1")
    assert isinstance(start, ToolCallStart)
    assert (start.kind, start.title) == ("read", "py: env")  # shown as its name streamed
    assert [u.raw_input for u in progress if u.raw_input is not None][-1] == {"name": "GIVEN"}
    assert [u.status for u in progress if u.status] == ["in_progress", "completed"]
    assert _tool_messages(model, 1)["m1"] == "from the editor"
    assert not editor.permission_requests  # readOnlyHint: runs like a read tool


async def test_a_tool_that_is_not_read_only_asks_and_a_decline_leaves_it_unrun(tmp_path: Path) -> None:
    editor = Editor(answers=["reject_once", "allow_always"])
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("mcp__py__write_note", {"text": "no"}, id="w1"),)),
            ToolCalls((ScriptedCall("mcp__py__write_note", {"text": "yes"}, id="w2"),)),
            ToolCalls((ScriptedCall("mcp__py__write_note", {"text": "again"}, id="w3"),)),
            Answer(text="ok"),
        )
        async with agent(editor, model) as conn:
            session = await new_session(conn, tmp_path, py_server())
            await conn.prompt(session_id=session.session_id, prompt=[text_block("write notes")])
    assert editor.final("w1").status == "failed"
    assert "declined" in _tool_messages(model, 1)["w1"]
    assert editor.final("w2").status == "completed" and editor.final("w3").status == "completed"
    assert len(editor.permission_requests) == 2  # allow_always is remembered for this tool
    tool_call, options, _ = editor.permission_requests[0]
    assert tool_call.kind == "other" and tool_call.title == "py: write_note"
    assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once", "reject_always"}
    assert (tmp_path / "note.txt").read_text() == "again"


async def test_read_only_mode_does_not_offer_a_tool_that_is_not_read_only(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="ok"))
        async with agent(Editor(), model, "--default-mode", "read-only") as conn:
            session = await new_session(conn, tmp_path, py_server())
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
    offered = model.requests[0].tool_names
    assert "mcp__py__echo" in offered and "mcp__py__write_note" not in offered


async def test_cancel_mid_call_ends_it_failed_and_cancels_it_on_the_server(tmp_path: Path) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("mcp__py__hang", {}, id="h1"),)), Answer(text="unreached"))
        async with agent(editor, model) as conn:
            session = await new_session(conn, tmp_path, py_server())
            result: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def prompt() -> None:
                    result.append(await conn.prompt(session_id=session.session_id, prompt=[text_block("hang")]))

                tg.start_soon(prompt)
                await _eventually(lambda: (tmp_path / "started.txt").exists())
                await conn.cancel(session_id=session.session_id)
            await _eventually(lambda: (tmp_path / "cancelled.txt").exists())  # notifications/cancelled arrived
    assert result[0].stop_reason == "cancelled"
    assert editor.final("h1").status == "failed"


async def _server_pid(conn: Any, model: LoopbackModel, session_id: str, call_id: str) -> int:
    model.enqueue(ToolCalls((ScriptedCall("mcp__py__pid", {}, id=call_id),)), Answer(text="pid"))
    await conn.prompt(session_id=session_id, prompt=[text_block("pid?")])
    return int(_tool_messages(model, len(model.requests) - 1)[call_id])


async def test_no_server_is_left_after_session_close_eof_or_sigterm(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        async with agent(Editor(), model) as conn:
            session = await new_session(conn, tmp_path, py_server())
            pid = await _server_pid(conn, model, session.session_id, "p1")
            assert _alive(pid)
            await conn.close_session(session_id=session.session_id)
            assert not _alive(pid)  # stopped and reaped before close answered

            other = await conn.new_session(cwd=str(tmp_path), mcp_servers=[py_server()])
            eof_pid = await _server_pid(conn, model, other.session_id, "p2")
        await _exited(eof_pid, 15)  # the editor closed the agent's stdin
        assert not _alive(eof_pid)

        async with agent(Editor(), model) as conn:
            session = await new_session(conn, tmp_path, py_server())
            term_pid = await _server_pid(conn, model, session.session_id, "p3")
            conn.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(15):
                assert await conn.process.wait() == 0
            assert not _alive(term_pid)  # the agent stopped and reaped it before exiting


async def test_load_replays_mcp_calls_and_reconnects_with_the_newest_env(tmp_path: Path) -> None:
    state = tmp_path / "state"
    project = tmp_path / "project"
    project.mkdir()
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("mcp__py__env", {"name": "V"}, id="e1"),)), Answer(text="first"))
        async with agent(Editor(), model, state=state) as conn:
            session = await new_session(conn, project, py_server(V="old"))
            await conn.prompt(session_id=session.session_id, prompt=[text_block("v?")])
        assert _tool_messages(model, 1)["e1"] == "old"

        editor = Editor()
        model.enqueue(ToolCalls((ScriptedCall("mcp__py__env", {"name": "V"}, id="e2"),)), Answer(text="second"))
        async with agent(editor, model, state=state) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            loaded = await conn.load_session(
                session_id=session.session_id, cwd=str(project), mcp_servers=[py_server(V="new")]
            )
            replayed = [u for u in editor.updates if isinstance(u, ToolCallStart)]
            assert [(u.tool_call_id, u.title) for u in replayed] == [("e1", "py: env")]
            await conn.prompt(session_id=session.session_id, prompt=[text_block("v again?")])
    assert loaded.field_meta["acpServer"]["mcpServers"][0]["status"] == "connected"
    assert _tool_messages(model, 3)["e2"] == "new"


def _ask_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env["ACP_SERVER_MCP_CONNECT_TIMEOUT_MS"] = "30000"
    return env


async def test_ask_takes_the_editors_mcp_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {"py": {"command": sys.executable, "args": [SERVER], "env": {"V": "from the file"}}}
    config.write_text(json.dumps({"mcpServers": servers}))
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("mcp__py__env", {"name": "V"}, id="a1"),)), Answer(text="the answer"))
        command = [sys.executable, "-m", "acp_server", "ask", "--base-url", model.base_url, "--model", "m"]
        with anyio.fail_after(60):
            result = await anyio.run_process(
                [*command, "--mcp-config", str(config), "what is V?"], check=False, env=_ask_env()
            )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == "the answer\n"
    assert _tool_messages(model, 1)["a1"] == "from the file"


async def test_ask_refuses_a_bad_mcp_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"py": {"args": []}}}))
    command = [sys.executable, "-m", "acp_server", "ask", "--offline", "--mcp-config"]
    with anyio.fail_after(60):
        bad = await anyio.run_process([*command, str(config), "hi"], check=False, env=_ask_env())
        missing = await anyio.run_process([*command, str(tmp_path / "none"), "hi"], check=False, env=_ask_env())
    assert bad.returncode == 2 and b"mcpServers.0.type" in bad.stderr and bad.stdout == b""
    assert missing.returncode == 2 and b"No such file" in missing.stderr
