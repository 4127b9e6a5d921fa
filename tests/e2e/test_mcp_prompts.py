"""MCP servers' prompts as slash commands on the wire: a real ``acp-server`` over real pipes with the test MCP server
(``tests/mcp_servers/py_server.py``, official ``mcp`` SDK) as its child. The prompts come in the
``available_commands_update`` that follows ``session/new``'s answer; a server silent on ``prompts/list`` delays the
answer only so long, and its prompts come later in a second update (never before the answer); running one sends what
the server gives to the model (the offline model echoes it); bad arguments are answered without it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.commands import COMMANDS

from ._agent import AgentProcess, spawn_agent
from .test_slash_commands import _is_commands

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "py_server.py")
FLAGS = ("--offline", "--no-persist", "--mcp-connect-timeout-ms", "30000")


def _py(**env: str) -> dict[str, Any]:
    variables = [{"name": key, "value": value} for key, value in env.items()]
    return {"name": "py", "command": sys.executable, "args": [SERVER], "env": variables}


async def _new_session(agent: AgentProcess, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``session/new``: its answer first (no commands before it), then its ``available_commands_update``."""
    response, before = await agent.until_response(await agent.request_nowait("session/new", params), timeout=60)
    assert "result" in response, response
    assert not any(_is_commands(message) for message in before), before
    session_id = response["result"]["sessionId"]
    message = await agent.receive()
    assert _is_commands(message, session_id), message
    return session_id, dict(message["params"]["update"])


async def _said(agent: AgentProcess, session_id: str, text: str) -> str:
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    response, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt), timeout=30)
    assert response["result"]["stopReason"] == "end_turn", response
    updates = [m["params"]["update"] for m in seen if m.get("method") == "session/update"]
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


async def test_the_prompts_are_offered_after_the_answer_and_run_with_their_arguments(tmp_path: Path) -> None:
    async with spawn_agent(*FLAGS) as agent:
        await agent.initialize()
        params = {"cwd": str(tmp_path), "mcpServers": [_py()]}
        sid, update = await _new_session(agent, params)
        commands = update["availableCommands"]
        names = [command["name"] for command in commands]
        builtins = [command.name for command in COMMANDS]
        assert names[: len(builtins)] == builtins and "help" in builtins  # the built-ins first
        by_name = {command["name"]: command for command in commands}
        assert by_name["mcp__py__review"] == {
            "name": "mcp__py__review",
            "description": "Review a piece of code. (MCP server 'py')",
            "input": {"hint": "code [style]"},
        }
        assert "input" not in by_name["mcp__py__context"]

        said = await _said(agent, sid, "/mcp__py__review 'x = 1' style=strict")
        assert said == "You said: Review this code (strict):\nx = 1"  # what the server gave reached the model
        refused = await _said(agent, sid, "/mcp__py__review")
        assert refused.startswith("/mcp__py__review needs the argument 'code'")


async def test_a_server_silent_on_prompts_list_has_its_prompts_announced_later(tmp_path: Path) -> None:
    release = tmp_path / "release"
    async with spawn_agent(*FLAGS) as agent:
        await agent.initialize()
        params = {"cwd": str(tmp_path), "mcpServers": [_py(PY_SERVER_HANG_PROMPTS=str(release))]}
        sid, first = await _new_session(agent, params)  # answered: not held for ever
        assert not any(c["name"].startswith("mcp__") for c in first["availableCommands"])
        release.write_text("")
        with anyio.fail_after(30):
            while True:
                message = await agent.receive(timeout=30)
                if _is_commands(message, sid):
                    break
        later = message["params"]["update"]["availableCommands"]
        assert later[: len(first["availableCommands"])] == first["availableCommands"]
        assert "mcp__py__review" in {command["name"] for command in later}
        said = await _said(agent, sid, "/mcp__py__review done")
        assert said == "You said: Review this code (concise):\ndone"
