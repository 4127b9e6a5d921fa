"""Slash commands on the wire, a real ``acp-server`` over real pipes: ``available_commands_update`` comes right
after the answer of ``session/new``, ``load``, ``resume`` and ``fork`` (never before it: a client drops an update
for a session it does not know yet), and a prompt ``/mode`` or ``/help`` runs the command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio


def _is_commands(message: dict[str, Any], session_id: str | None = None) -> bool:
    params = message.get("params") or {}
    return (
        message.get("method") == "session/update"
        and params.get("update", {}).get("sessionUpdate") == "available_commands_update"
        and (session_id is None or params.get("sessionId") == session_id)
    )


async def _answer_then_commands(
    agent: AgentProcess, method: str, params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Send a request; its answer comes first, then (among whatever else follows) the session's commands. Returns
    the session's id and the update."""
    response, before = await agent.until_response(await agent.request_nowait(method, params))
    assert "result" in response, response
    assert not any(_is_commands(message) for message in before), before
    session_id = response["result"].get("sessionId") or params["sessionId"]
    with anyio.fail_after(10):
        while True:
            message = await agent.receive()
            if _is_commands(message):
                assert message["params"]["sessionId"] == session_id
                return session_id, dict(message["params"]["update"])


async def test_the_commands_follow_every_answer_that_makes_a_session_known(tmp_path: Path) -> None:
    async with spawn_agent("--offline", "--no-persist") as agent:
        await agent.initialize()
        cwd = str(tmp_path)
        sid, update = await _answer_then_commands(agent, "session/new", {"cwd": cwd, "mcpServers": []})
        names = {command["name"] for command in update["availableCommands"]}
        assert {"init", "mode", "model", "help"} <= names
        for method, params in (
            ("session/fork", {"sessionId": sid, "cwd": cwd}),
            ("session/resume", {"sessionId": sid, "cwd": cwd}),
            ("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        ):
            _, again = await _answer_then_commands(agent, method, params)
            assert again == update


async def test_a_mode_command_switches_the_mode_and_says_so(tmp_path: Path) -> None:
    async with spawn_agent("--offline", "--no-persist") as agent:
        await agent.initialize()
        sid = await agent.new_session(str(tmp_path))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "/mode read-only"}]}
        response, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt))
        assert response["result"]["stopReason"] == "end_turn"
        updates = [m["params"]["update"] for m in seen if m.get("method") == "session/update"]
        kinds = [update["sessionUpdate"] for update in updates]
        assert "current_mode_update" in kinds
        assert kinds.index("current_mode_update") < kinds.index("agent_message_chunk")
        [mode] = [update for update in updates if update["sessionUpdate"] == "current_mode_update"]
        assert mode["currentModeId"] == "read-only"
        said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
        assert said.startswith("Mode set to read-only")

        help_prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "/help"}]}
        response, seen = await agent.until_response(await agent.request_nowait("session/prompt", help_prompt))
        said = "".join(
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert "/init" in said and "/mode" in said and "/model" in said

        other = {"sessionId": sid, "prompt": [{"type": "text", "text": "/not-a-command hello"}]}
        response, seen = await agent.until_response(await agent.request_nowait("session/prompt", other))
        said = "".join(
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert "You said: /not-a-command hello" in said  # the offline model got it as text
