"""A session's MCP servers, driven directly: the real test server (``tests/mcp_servers/py_server.py``, on the
official ``mcp`` SDK) as a child process over real pipes. Tools listed and named, calls and results, env, schema
validation, list_changed, cancel and timeouts reaching the server, broken and slow servers, death and revival,
nothing left running after close."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.mcp import McpServers, McpSettings, parse_mcp_servers
from acp_server.modes import READ_ONLY_MODE
from acp_server.tools import OUTPUT_LIMIT_BYTES, ToolCallError, ToolResult
from acp_server.tools.builtin import TOOL_NAMES, builtin_tool_set
from acp_server.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "py_server.py")


def py_server(name: str = "py", env: dict[str, str] | None = None) -> dict[str, Any]:
    pairs = [{"name": key, "value": value} for key, value in (env or {}).items()]
    return {"name": name, "command": sys.executable, "args": [SERVER], "env": pairs}


@asynccontextmanager
async def connected(
    cwd: Path, *servers: dict[str, Any], settings: McpSettings | None = None
) -> AsyncIterator[tuple[ToolSet, McpServers]]:
    tools = builtin_tool_set()
    async with anyio.create_task_group() as tg:
        mcp = McpServers(tools, str(cwd), settings or McpSettings(connect_timeout_s=20))
        try:
            with anyio.fail_after(30):
                await mcp.connect(parse_mcp_servers(list(servers)), tg)
            yield tools, mcp
        finally:
            await mcp.aclose()


async def call(tools: ToolSet, name: str, arguments: dict[str, Any] | None = None, cwd: str = "/") -> ToolResult:
    prepared = await tools.prepare(name, json.dumps(arguments or {}), cwd=cwd, client=None, offered=tools.names)

    async def sink(content: Any) -> None:
        pass

    with anyio.fail_after(30):
        return await prepared.run(sink)


async def eventually(condition: Callable[[], bool]) -> None:
    """Wait for another process's doing (bounded polling, never a fixed sleep)."""
    for _ in range(1000):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("condition not met in time")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_tools_are_listed_named_and_offered_by_their_read_only_hint(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, mcp):
        assert tools.names[: len(TOOL_NAMES)] == TOOL_NAMES  # built-ins first, unchanged
        assert "mcp__py__echo" in tools.names and "mcp__py__write_note" in tools.names
        echo, note = tools.get("mcp__py__echo"), tools.get("mcp__py__write_note")
        assert echo is not None and note is not None
        assert (echo.kind, echo.read_only, echo.needs_permission, echo.source) == ("read", True, False, "py")
        assert (note.kind, note.read_only, note.needs_permission) == ("other", False, True)
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert "Echo the text back." in echo.description
        assert "mcp__py__echo" in tools.offered(READ_ONLY_MODE)
        assert "mcp__py__write_note" not in tools.offered(READ_ONLY_MODE)
        assert "mcp__py__write_note" in tools.offered("default")
        entry = tools.entries(["mcp__py__echo"])[0]
        assert entry["function"]["name"] == "mcp__py__echo"
        assert mcp.status() == [{"name": "py", "transport": "stdio", "status": "connected", "tools": 11}]
        arguments = '{"text": "x"}'
        prepared = await tools.prepare("mcp__py__write_note", arguments, cwd="/", client=None, offered=tools.names)
        assert prepared.title == "py: write_note" and prepared.rule == "mcp__py__write_note"


async def test_a_call_returns_the_servers_text_and_env_reaches_it_without_the_agents_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-agent-secret")
    monkeypatch.setenv("ACP_SERVER_TOKEN", "token-secret")
    monkeypatch.setenv("AGENT_VISIBLE", "inherited")
    async with connected(tmp_path, py_server(env={"GIVEN": "from-editor"})) as (tools, _):
        assert (await call(tools, "mcp__py__echo", {"text": "hi"})).output == "echo: hi"
        assert (await call(tools, "mcp__py__env", {"name": "GIVEN"})).output == "from-editor"
        assert (await call(tools, "mcp__py__env", {"name": "AGENT_VISIBLE"})).output == "inherited"
        assert (await call(tools, "mcp__py__env", {"name": "OPENAI_API_KEY"})).output == "<unset>"
        assert (await call(tools, "mcp__py__env", {"name": "ACP_SERVER_TOKEN"})).output == "<unset>"
        await call(tools, "mcp__py__write_note", {"text": "noted"})
        assert (tmp_path / "note.txt").read_text() == "noted"  # the server runs in the session's cwd


async def test_is_error_fails_the_call_and_bad_arguments_are_refused_by_the_schema(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, _):
        result = await call(tools, "mcp__py__fail")
        assert result.failed and "the tool failed on purpose" in result.output
        with pytest.raises(ToolCallError, match="text: 3 is not of type 'string'"):
            await tools.prepare("mcp__py__echo", '{"text": 3}', cwd="/", client=None, offered=tools.names)
        with pytest.raises(ToolCallError, match="'text' is a required property"):
            await tools.prepare("mcp__py__echo", "{}", cwd="/", client=None, offered=tools.names)


async def test_a_huge_result_is_capped_with_a_note(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, _):
        result = await call(tools, "mcp__py__big", {"size": 300_000})
    assert not result.failed
    assert len(result.output.encode()) <= OUTPUT_LIMIT_BYTES and "cut" in result.output


async def test_list_changed_re_lists_the_tools(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, _):
        assert "mcp__py__late" not in tools.names
        assert (await call(tools, "mcp__py__grow")).output == "grown"
        await eventually(lambda: "mcp__py__late" in tools.names)
        assert (await call(tools, "mcp__py__late")).output == "late tool"


async def test_cancel_reaches_the_server(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, _):
        prepared = await tools.prepare("mcp__py__hang", "{}", cwd="/", client=None, offered=tools.names)
        finished = anyio.Event()

        async def sink(content: Any) -> None:
            pass

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    await prepared.run(sink)
                finally:
                    finished.set()

            tg.start_soon(run)
            await eventually(lambda: (tmp_path / "started.txt").exists())  # the server runs the tool
            tg.cancel_scope.cancel()
        assert finished.is_set()
        await eventually(lambda: (tmp_path / "cancelled.txt").exists())  # the server stopped the tool


async def test_a_call_that_hangs_past_the_call_timeout_fails_and_is_cancelled_on_the_server(tmp_path: Path) -> None:
    settings = McpSettings(connect_timeout_s=20, call_timeout_s=0.5)
    async with connected(tmp_path, py_server(), settings=settings) as (tools, _):
        result = await call(tools, "mcp__py__hang")
        assert result.failed and "did not answer within 0.5 s" in result.output
        await eventually(lambda: (tmp_path / "cancelled.txt").exists())


async def test_a_broken_server_beside_a_good_one(tmp_path: Path) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": []}
    exits = {"name": "exits", "command": sys.executable, "args": ["-c", "print('not json')"]}
    async with connected(tmp_path, broken, py_server(), exits) as (tools, mcp):
        status = {state["name"]: state for state in mcp.status()}
        assert status["py"]["status"] == "connected"
        assert status["broken"]["status"] == "failed" and "command not found" in status["broken"]["error"]
        assert status["exits"]["status"] == "failed"
        assert not [name for name in tools.names if "broken" in name or "exits" in name]
        assert (await call(tools, "mcp__py__echo", {"text": "still"})).output == "echo: still"


async def test_a_server_that_never_answers_is_stopped_at_the_connect_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    silent = {"name": "silent", "command": "/bin/sh", "args": ["-c", f"echo $$ > {pid_file}; exec sleep 60"]}
    async with connected(tmp_path, silent, settings=McpSettings(connect_timeout_s=0.5)) as (tools, mcp):
        (state,) = mcp.status()
        assert state["status"] == "failed" and "not connected within 0.5 s" in state["error"]
        pid = int(pid_file.read_text())
    assert not alive(pid)
    assert tools.names == TOOL_NAMES


async def test_close_stops_and_reaps_the_server(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, mcp):
        pid = int((await call(tools, "mcp__py__pid")).output)
        assert alive(pid)
        await mcp.aclose()
        assert not alive(pid)
        assert tools.names == TOOL_NAMES


async def test_a_dead_server_fails_its_calls_and_revives_once_asked(tmp_path: Path) -> None:
    async with connected(tmp_path, py_server()) as (tools, mcp):
        pid = int((await call(tools, "mcp__py__pid")).output)
        prepared = await tools.prepare("mcp__py__echo", '{"text": "x"}', cwd="/", client=None, offered=tools.names)
        os.kill(pid, signal.SIGKILL)
        await eventually(lambda: mcp.status()[0]["status"] == "failed")
        assert "mcp__py__echo" not in tools.names

        async def sink(content: Any) -> None:
            pass

        result = await prepared.run(sink)  # a call prepared before it died
        assert result.failed and "'py' is not running" in result.output
        with anyio.fail_after(30):
            await tools.prepare_prompt()  # what the turn does once per prompt
        assert mcp.status()[0]["status"] == "connected"
        assert int((await call(tools, "mcp__py__pid")).output) != pid


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def http_server(flag: str) -> AsyncIterator[int]:
    """The test server over HTTP on 127.0.0.1 (``--http``: Streamable HTTP, ``--sse``: HTTP+SSE); its port once it
    listens."""
    port = free_port()
    async with await anyio.open_process([sys.executable, SERVER, flag, str(port)]) as process:
        try:
            for _ in range(3000):  # until it listens (bounded)
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.01)
                    continue
                await stream.aclose()
                break
            yield port
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True):
                await process.wait()


@pytest.mark.parametrize(("flag", "kind", "path"), [("--http", "http", "/mcp"), ("--sse", "sse", "/sse")])
async def test_http_servers_with_headers(tmp_path: Path, flag: str, kind: str, path: str) -> None:
    async with http_server(flag) as port:
        server = {
            "type": kind,
            "name": "web",
            "url": f"http://127.0.0.1:{port}{path}",
            "headers": [{"name": "X-Editor-Token", "value": "from-the-editor"}],
        }
        async with connected(tmp_path, server) as (tools, mcp):
            assert mcp.status()[0]["status"] == "connected"
            assert (await call(tools, "mcp__web__echo", {"text": kind})).output == f"echo: {kind}"
            header = await call(tools, "mcp__web__header", {"name": "x-editor-token"})
            assert header.output == "from-the-editor"


async def test_a_server_that_sends_an_endless_line_is_dropped_with_bounded_memory(tmp_path: Path) -> None:
    flood = "import sys, time\nsys.stdout.write('x' * (17 * 1024 * 1024)); sys.stdout.flush(); time.sleep(60)"
    server = {"name": "flood", "command": sys.executable, "args": ["-c", flood]}
    async with connected(tmp_path, server, py_server()) as (tools, mcp):
        states = {state["name"]: state for state in mcp.status()}
        assert states["flood"]["status"] == "failed"
        assert "over 16777216 bytes" in states["flood"]["error"]
        assert states["py"]["status"] == "connected"
        assert not [name for name in tools.names if "flood" in name]


@pytest.mark.parametrize(("flag", "kind", "path"), [("--http", "http", "/mcp"), ("--sse", "sse", "/sse")])
async def test_an_http_server_s_message_over_the_bound_ends_its_connection(
    tmp_path: Path, flag: str, kind: str, path: str
) -> None:
    """Over HTTP as over stdio, a message is at most MAX_MESSAGE_BYTES: one past it (a 17 MiB result) is not read
    into memory; the call fails at once and the server is dropped saying why."""
    async with http_server(flag) as port:
        server = {"type": kind, "name": "web", "url": f"http://127.0.0.1:{port}{path}", "headers": []}
        settings = McpSettings(connect_timeout_s=20, call_timeout_s=600)  # the failure is not a timeout
        async with connected(tmp_path, server, settings=settings) as (tools, mcp):
            assert (await call(tools, "mcp__web__big", {"size": 1024})).output == "x" * 1024
            result = await call(tools, "mcp__web__big", {"size": 17 * 1024 * 1024})
            assert result.failed and "over 16777216 bytes" in result.output, result.output[:300]
            state = mcp.status()[0]
            assert state["status"] == "failed" and "over 16777216 bytes" in state["error"]
