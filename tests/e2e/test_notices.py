"""Notices (ACP 1.25 ``sessionUpdate: "notice"``), only for a client that advertised ``session.notices``: a retry
wait, an MCP server whose tools are gone, project instructions that were cut, a context window too small at
``session/new``. Live only (a replay has none). A client that advertises nothing sees what it saw before: the retry
as a thought, the window as an agent message, nothing of the rest. Every update valid against
``@agentclientprotocol/sdk@2.4.0``'s schema. A raw NDJSON client, a real agent process, the scriptable model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, ErrorStatus, LoopbackModel
from tests.acp_wire_schema import updates, validate_update

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

NOTICES = {"session": {"notices": {}}}
BROKEN = {"name": "broken", "command": "/nonexistent/acp-server-test-mcp", "args": [], "env": []}


async def _initialize(agent: AgentProcess, capabilities: dict[str, Any]) -> None:
    reply = await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    assert "result" in reply, reply


@pytest.mark.parametrize("advertised", [True, False], ids=["notices", "nothing"])
async def test_a_prompts_notices_go_to_a_client_that_shows_them_and_are_never_replayed(
    tmp_path: Path, advertised: bool
) -> None:
    (tmp_path / "AGENTS.md").write_text("Be brief.\n" * 4000)  # 40 KB: over the 32 KiB cap
    async with LoopbackModel() as model:
        model.enqueue(ErrorStatus(503), Answer(text="fine", reasoning=""))
        env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
        async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:
            await _initialize(agent, NOTICES if advertised else {})
            created = await agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": [BROKEN]})
            session_id = created["result"]["sessionId"]
            await agent.commands_update(session_id)
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            reply, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt), 30)
            assert reply["result"]["stopReason"] == "end_turn", reply
            load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            loaded, replayed = await agent.until_response(await agent.request_nowait("session/load", load), 20)
            assert "result" in loaded, loaded
    for message in seen + replayed:
        validate_update(message["params"])
    notices = updates(seen, "notice")
    retried = [u for u in updates(seen, "agent_thought_chunk") if "retry" in u.get("_meta", {}).get("acpServer", {})]
    assert updates(replayed, "notice") == []  # never stored
    if not advertised:
        assert notices == []
        assert len(retried) == 1  # told as before: a thought marked as a retry
        return
    assert retried == []
    by_severity = sorted((n["severity"], n["title"]) for n in notices)
    assert [severity for severity, _ in by_severity] == ["info", "warning", "warning"], notices
    info, server, retry = by_severity
    assert info[1] == "Project instructions were cut: AGENTS.md"
    assert server[1] == "MCP server 'broken' is not running: its tools are unavailable"
    assert re.fullmatch(r"Retrying the model request \(attempt 2 of 5\) in [0-9.]+ s", retry[1]), retry
    [retry_notice] = [n for n in notices if n["title"] == retry[1]]
    assert retry_notice["description"] == "server error (HTTP 503)"


@pytest.mark.parametrize("advertised", [True, False], ids=["notices", "nothing"])
async def test_a_window_too_small_is_a_notice_for_a_client_that_shows_them(tmp_path: Path, advertised: bool) -> None:
    async with LoopbackModel() as model:
        args = ("--base-url", model.base_url, "--model", "m", "--context-window", "1024", "--no-persist")
        async with spawn_agent(*args, env={"HOME": str(tmp_path)}) as agent:
            await _initialize(agent, NOTICES if advertised else {})
            session_id = await agent.new_session(str(tmp_path))  # its commands first, then what it is told
            told = await agent.receive()
    validate_update(told["params"])
    update = told["params"]["update"]
    if advertised:
        assert (update["sessionUpdate"], update["severity"]) == ("notice", "error"), update
        assert "(1024 tokens) is too small" in update["description"]
    else:
        assert update["sessionUpdate"] == "agent_message_chunk", update
        assert "(1024 tokens) is too small" in update["content"]["text"]
        assert update["messageId"].startswith(f"{session_id}/")
