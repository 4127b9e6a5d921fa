"""MCP servers through the daemon: ``POST /session`` and resume take ``mcpServers`` (ACP's shape), the REST events carry
the servers' tool calls, the SDK's ``create_session(..., mcp_servers=...)`` passes them; a daemon without a token
starts no stdio server. Real daemon in process, the test MCP server as a real child process, the loopback model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.client import DaemonClient, DaemonInvalidRequestError
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import assert_documented, running_daemon
from .test_acp_http import RawAcp
from .test_tools import TOKEN, call_updates, tool_messages, until

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "py_server.py")
PY = {"name": "py", "command": sys.executable, "args": [SERVER], "env": [{"name": "V", "value": "daemon"}]}


async def test_post_session_connects_the_servers_and_events_carry_their_calls(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path), "mcpServers": [PY]}, timeout=30)
        assert created.status_code == 201, created.text
        assert_documented("POST", "/session", created)
        session_id = created.json()["sessionId"]
        state = {"name": "py", "transport": "stdio", "status": "connected", "tools": 11}
        assert created.json()["mcpServers"] == [state]

        model.enqueue(ToolCalls((ScriptedCall("mcp__py__env", {"name": "V"}, id="m1"),)), Answer(text="ok"))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "v?")).status_code == 202
            seen = await until(events, "turn_complete")
        updates = call_updates(seen, "m1")
        assert updates[0]["title"] == "py: env" and updates[0]["kind"] == "read"
        assert updates[-1]["status"] == "completed"
        assert tool_messages(model, 1)["m1"] == "daemon"

        resumed = await served.client.post(f"/session/{session_id}/resume", json={"mcpServers": []}, timeout=30)
        assert resumed.status_code == 200, resumed.text
        assert_documented("POST", "/session/{sessionId}/resume", resumed)
        assert "mcpServers" not in resumed.json()  # an empty list: its servers were stopped


async def test_a_tokenless_daemon_starts_no_stdio_server_and_bad_shapes_are_400(tmp_path: Path) -> None:
    async with running_daemon(None) as served:
        refused = await served.client.post("/session", json={"cwd": str(tmp_path), "mcpServers": [PY]})
        assert refused.status_code == 400
        assert_documented("POST", "/session", refused)
        assert refused.json()["details"][0]["field"] == "mcpServers"
        assert "read-only" in refused.json()["error"]
    async with running_daemon(None, token=TOKEN) as served:
        for servers, field in (
            ([{"name": "x"}], "mcpServers.0.type"),
            ([{"name": "x", "type": "http", "url": "ftp://x"}], "mcpServers.0.url"),
            ([PY, PY], "mcpServers.1.name"),
            ("nope", "mcpServers"),
        ):
            response = await served.client.post("/session", json={"cwd": str(tmp_path), "mcpServers": servers})
            assert response.status_code == 400, response.text
            assert response.json()["details"][0]["field"] == field
        assert not served.bridge.sessions  # nothing was created


async def test_the_sdk_passes_mcp_servers(tmp_path: Path) -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN, timeout=30) as client,
    ):
        session_id = await client.create_session(tmp_path, mcp_servers=[PY])
        entry: Any = served.bridge.get(session_id)
        assert "mcp__py__echo" in entry.tools.names
        with pytest.raises(DaemonInvalidRequestError):
            await client.create_session(tmp_path, mcp_servers=[{"name": "bad"}])


async def test_acp_over_http_passes_mcp_servers_through(tmp_path: Path) -> None:
    async with running_daemon(None, token=TOKEN) as served:
        acp = RawAcp(served)
        initialized = await acp.initialize()
        assert initialized["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}
        async with acp.stream() as connection_stream:
            message = acp.message("session/new", {"cwd": str(tmp_path), "mcpServers": [PY]})
            assert (await acp.post(message)).status_code == 202
            *_, created = await connection_stream.until_response(message["id"], timeout=30)
        (state,) = created["result"]["_meta"]["acpServer"]["mcpServers"]
        assert (state["name"], state["status"]) == ("py", "connected")
        entry: Any = served.bridge.get(created["result"]["sessionId"])
        assert "mcp__py__env" in entry.tools.names


async def test_a_rest_prompt_runs_an_mcp_prompt_command_like_any_face(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path), "mcpServers": [PY]}, timeout=30)
        session_id = created.json()["sessionId"]
        model.enqueue(Answer(text="reviewed"))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "/mcp__py__review 'x = 1' style=strict")).status_code == 202
            await until(events, "turn_complete")
            assert (await served.prompt(session_id, "/mcp__py__review")).status_code == 202  # no model call
            seen = await until(events, "turn_complete")
        [request] = model.requests
        assert request.messages[-1] == {"role": "user", "content": "Review this code (strict):\nx = 1"}
        said = "".join(
            e.data["update"]["content"]["text"]
            for e in seen
            if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert said.startswith("/mcp__py__review needs the argument 'code'")
