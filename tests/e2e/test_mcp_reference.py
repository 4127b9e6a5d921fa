"""The reference MCP servers from npm through the real agent: ``@modelcontextprotocol/server-everything`` over stdio
and Streamable HTTP, ``@modelcontextprotocol/server-filesystem`` over stdio, the official ACP Python SDK as the
editor, the loopback model calling their tools; server-everything's prompts as slash commands. Skips with the reason
when node or npm is missing or the packages cannot be installed; ``MCP_REFERENCE_SERVERS_DIR`` may name a directory
where they are installed (``.ci/run``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio

from acp_server.mcp import McpServers, McpSettings, parse_mcp_servers
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools.builtin import builtin_tool_set

from ._agent import spawn_agent
from .test_mcp import agent, new_session
from .test_mcp_prompts import _new_session, _said
from .test_tools import Editor, _tool_messages

pytestmark = pytest.mark.anyio

PACKAGES = ["@modelcontextprotocol/server-everything@2026.8.31", "@modelcontextprotocol/server-filesystem@2026.8.31"]
LOOPBACK = Path(__file__).resolve().parents[1] / "mcp_servers" / "loopback.cjs"


@pytest.fixture(scope="module")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    given = os.environ.get("MCP_REFERENCE_SERVERS_DIR")
    if given and (Path(given) / "node_modules" / ".bin" / "mcp-server-everything").exists():
        return Path(given)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    where = tmp_path_factory.mktemp("mcp-reference")
    (where / "package.json").write_text('{"name": "mcp-reference-servers", "private": true}')
    try:
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", *PACKAGES],
            cwd=where,
            check=True,
            timeout=240,
            capture_output=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"could not install {PACKAGES} from npm: {exc}")
    return where


def binary(where: Path, name: str) -> str:
    return str(where / "node_modules" / ".bin" / name)


async def test_everything_over_stdio_tools_env_image_and_list_changed(
    servers_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    everything = McpServerStdio(
        name="everything",
        command=binary(servers_dir, "mcp-server-everything"),
        args=["stdio"],
        env=[EnvVariable(name="GIVEN_BY_EDITOR", value="yes")],
    )
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("mcp__everything__echo", {"message": "hello"}, id="e1"),
                    ScriptedCall("mcp__everything__get-env", {}, id="e2"),
                    ScriptedCall("mcp__everything__get-tiny-image", {}, id="e3"),
                    ScriptedCall("mcp__everything__get-sum", {"a": "x", "b": 2}, id="e4"),
                )
            ),
            Answer(text="ok"),
        )
        async with agent(editor, model) as conn:
            session = await new_session(conn, tmp_path, everything)
            await conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "go"}])
    (state,) = session.field_meta["acpServer"]["mcpServers"]
    assert state["status"] == "connected" and state["tools"] >= 10
    assert {"mcp__everything__echo", "mcp__everything__get-env"} <= set(model.requests[0].tool_names)
    messages = _tool_messages(model, 1)
    assert "hello" in messages["e1"]
    env = json.loads(messages["e2"])
    assert env["GIVEN_BY_EDITOR"] == "yes" and "OPENAI_API_KEY" not in env
    assert "[image (image/png" in messages["e3"]
    shown = [m for m in model.requests[1].messages if m["role"] == "user" and isinstance(m["content"], list)]
    assert shown[-1]["content"][0]["text"] == "Images returned by mcp__everything__get-tiny-image (call e3):"
    assert shown[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert any(getattr(c.content, "type", None) == "image" for c in editor.final("e3").content)
    assert editor.final("e4").status == "failed" and "schema" in messages["e4"]  # refused before it was sent
    assert not editor.permission_requests  # every tool here is annotated readOnlyHint

    # list_changed: the server registers tools once initialized and says so; the client lists again.
    tools = builtin_tool_set()
    async with anyio.create_task_group() as tg:
        mcp = McpServers(tools, str(tmp_path), McpSettings(connect_timeout_s=30))
        with caplog.at_level("INFO", logger="acp_server.mcp"), anyio.fail_after(60):
            await mcp.connect(
                parse_mcp_servers([{"name": "everything", "command": everything.command, "args": ["stdio"]}]), tg
            )
            for _ in range(1000):
                if any("tools re-listed" in record.getMessage() for record in caplog.records):
                    break
                await anyio.sleep(0.01)
        await mcp.aclose()
    assert any("everything: tools re-listed" in record.getMessage() for record in caplog.records)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def _everything_http(servers_dir: Path) -> AsyncIterator[int]:
    port = _free_port()
    script = servers_dir / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    env = {**os.environ, "PORT": str(port), "NODE_OPTIONS": f"--require {LOOPBACK}"}
    async with await anyio.open_process(["node", str(script), "streamableHttp"], env=env) as process:
        try:
            for _ in range(3000):
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.01)
            yield port
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True):
                await process.wait()


async def test_everything_over_streamable_http(servers_dir: Path, tmp_path: Path) -> None:
    async with _everything_http(servers_dir) as port, LoopbackModel() as model:
        server = HttpMcpServer(
            type="http",
            name="web",
            url=f"http://127.0.0.1:{port}/mcp",
            headers=[HttpHeader(name="X-Editor", value="zed")],
        )
        model.enqueue(
            ToolCalls((ScriptedCall("mcp__web__echo", {"message": "over http"}, id="h1"),)), Answer(text="ok")
        )
        async with agent(Editor(), model) as conn:
            session = await new_session(conn, tmp_path, server)
            await conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "go"}])
    assert session.field_meta["acpServer"]["mcpServers"][0]["status"] == "connected"
    assert "over http" in _tool_messages(model, 1)["h1"]


async def test_filesystem_reads_freely_and_asks_before_writing(servers_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.txt").write_text("hello from disk\n")
    server = McpServerStdio(
        name="fs", command=binary(servers_dir, "mcp-server-filesystem"), args=[str(project)], env=[]
    )
    editor = Editor(answers=["reject_once"])
    write = {"path": str(project / "new.txt"), "content": "x"}
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("mcp__fs__read_text_file", {"path": str(project / "hello.txt")}, id="r1"),
                    ScriptedCall("mcp__fs__write_file", write, id="w1"),
                )
            ),
            Answer(text="ok"),
        )
        async with agent(editor, model) as conn:
            session = await new_session(conn, project, server)
            await conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "go"}])
    assert "hello from disk" in _tool_messages(model, 1)["r1"]
    assert len(editor.permission_requests) == 1 and editor.permission_requests[0][0].tool_call_id == "w1"
    assert editor.final("w1").status == "failed" and not (project / "new.txt").exists()


async def test_everything_prompts_are_slash_commands(servers_dir: Path, tmp_path: Path) -> None:
    everything = {"name": "everything", "command": binary(servers_dir, "mcp-server-everything"), "args": ["stdio"]}
    async with spawn_agent("--offline", "--no-persist", "--mcp-connect-timeout-ms", "60000") as agent:
        await agent.initialize()
        sid, update = await _new_session(agent, {"cwd": str(tmp_path), "mcpServers": [{**everything, "env": []}]})
        by_name = {command["name"]: command for command in update["availableCommands"]}
        assert {"mcp__everything__simple-prompt", "mcp__everything__resource-prompt"} <= set(by_name)
        assert by_name["mcp__everything__args-prompt"] == {
            "name": "mcp__everything__args-prompt",
            "description": "A prompt with two arguments, one required and one optional (MCP server 'everything')",
            "input": {"hint": "city [state]"},
        }
        assert await _said(agent, sid, "/mcp__everything__args-prompt Paris") == "You said: What's weather in Paris?"
        refused = await _said(agent, sid, "/mcp__everything__args-prompt state=TX")
        assert refused.startswith("/mcp__everything__args-prompt needs the argument 'city'")
        refused = await _said(agent, sid, "/mcp__everything__resource-prompt resourceType=Nope resourceId=1")
        assert refused.startswith("/mcp__everything__resource-prompt failed: the MCP server 'everything' answered")
        embedded = await _said(agent, sid, "/mcp__everything__resource-prompt Text 1")
        assert embedded.startswith("You said: ")
