"""The user's command files through a real agent: offered after the built-ins in ``available_commands_update``
(a built-in's name stays the built-in's), run as a normal prompt with the arguments substituted, and re-read
when the files change (the next prompt after a second announces the new list first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _names(update: dict[str, Any]) -> list[str]:
    return [c["name"] for c in update["params"]["update"]["availableCommands"]]


async def _prompt(agent: AgentProcess, session_id: str, text: str) -> list[dict[str, Any]]:
    prompt = [{"type": "text", "text": text}]
    msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
    reply, seen = await agent.until_response(msg_id, timeout=30)
    assert reply["result"]["stopReason"] == "end_turn", reply
    return seen


async def test_command_files_are_offered_run_and_re_read(tmp_path: Path) -> None:
    project, config = tmp_path / "project", tmp_path / "config"
    (project / ".agents/commands").mkdir(parents=True)
    (project / ".agents/commands/review.md").write_text(
        "---\ndescription: Review the named files\nargument-hint: <files>\n---\n"
        "Review $ARGUMENTS carefully; start with $1.\n"
    )
    (config / "acp-server/commands").mkdir(parents=True)
    (config / "acp-server/commands/help.md").write_text("not the built-in")
    (config / "acp-server/commands/standup.md").write_text("Summarise yesterday's commits.\n")
    async with LoopbackModel() as model:
        env = {"XDG_CONFIG_HOME": str(config)}
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m", env=env) as agent:
            await agent.initialize()
            reply = await agent.request("session/new", {"cwd": str(project), "mcpServers": []})
            session_id = reply["result"]["sessionId"]
            first = await agent.commands_update(session_id)
            names = _names(first)
            assert names[-2:] == ["review", "standup"] and names.count("help") == 1
            review = next(c for c in first["params"]["update"]["availableCommands"] if c["name"] == "review")
            assert review["description"] == "Review the named files"
            assert review["input"] == {"hint": "<files>"}

            model.enqueue(Answer(text="reviewed"))
            await _prompt(agent, session_id, "/review a.py b.py")
            user = [m for m in model.requests[-1].messages if m["role"] == "user"][-1]
            assert "Review a.py b.py carefully; start with a.py." in str(user["content"])

            (project / ".agents/commands/deploy.md").write_text("Deploy $ARGUMENTS\n")
            with anyio.fail_after(20):  # the files are looked at again once a second has passed: prompts until then
                while True:
                    model.enqueue(Answer(text="ok"))
                    seen = await _prompt(agent, session_id, "hello")
                    updates = [
                        m
                        for m in seen
                        if m.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
                    ]
                    if updates:
                        break
            assert _names(updates[-1])[-3:] == ["deploy", "review", "standup"]
