"""Plans end to end over real pipes with the offline model (a ``plan: a; b`` prompt makes it call
``update_plan``): the editor gets ACP's ``plan`` update after the call, in the read-only mode and unasked; a new
process's ``session/load`` replays it; ``ask`` prints the checklist on stderr and keeps stdout the answer's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from ._agent import COMMAND, spawn_agent

pytestmark = pytest.mark.anyio

PROMPT = "plan: read the code; fix the bug; run the tests"
ENTRIES = [
    {"content": "read the code", "priority": "medium", "status": "in_progress"},
    {"content": "fix the bug", "priority": "medium", "status": "pending"},
    {"content": "run the tests", "priority": "medium", "status": "pending"},
]


def _updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


async def test_a_plan_reaches_the_editor_and_is_replayed_by_session_load(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    cwd = str(tmp_path)
    async with spawn_agent("--offline", env=env) as agent:
        await agent.initialize()
        session_id = await agent.new_session(cwd)
        await agent.request("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT}]}
        reply, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt), timeout=20)
        assert reply["result"]["stopReason"] == "end_turn", (reply, agent.stderr[-2000:])
        assert not [m for m in seen if m.get("method") == "session/request_permission"]
        updates = _updates(seen)
        plans = [u for u in updates if u["sessionUpdate"] == "plan"]
        assert plans == [{"sessionUpdate": "plan", "entries": ENTRIES}]
        before = updates[updates.index(plans[0]) - 1]
        assert before["sessionUpdate"] == "tool_call_update" and before["status"] == "completed"
        for message in seen:
            if message.get("method") == "session/update":
                schema.SessionNotification.model_validate(message["params"])

    async with spawn_agent("--offline", env=env) as agent:
        await agent.initialize()
        load = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        reply, seen = await agent.until_response(await agent.request_nowait("session/load", load), timeout=20)
        assert "result" in reply, reply
        replayed = [u for u in _updates(seen) if u["sessionUpdate"] == "plan"]
        assert replayed == [{"sessionUpdate": "plan", "entries": ENTRIES}]


def test_ask_prints_the_plan_as_a_checklist_on_stderr(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    result = subprocess.run(
        [*COMMAND, "ask", "--offline", PROMPT],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"You said: {PROMPT}\n"
    assert "Plan:\n  [>] read the code\n  [ ] fix the bug\n  [ ] run the tests\n" in result.stderr
