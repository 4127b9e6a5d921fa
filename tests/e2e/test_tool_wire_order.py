"""On the wire: no update of a prompt is written after the prompt's answer, also when a cancel catches a tool call
waiting for permission or running a command, and when the editor answers the cancelled permission request late —
read to the agent's end of output.

A raw NDJSON client (every line in the order the agent wrote it), a real agent process, the scriptable model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.provider.offline import LoopbackModel, ScriptedCall, ToolCalls

from ._agent import AgentProcess, spawn_agent

pytestmark = pytest.mark.anyio


async def _until(agent: AgentProcess, wanted: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read until a message ``wanted(message)`` accepts; returns it and the ones before it."""
    seen: list[dict[str, Any]] = []
    with anyio.fail_after(20):
        while True:
            message = await agent.receive()
            if wanted(message):
                return message, seen
            seen.append(message)


async def _rest(agent: AgentProcess) -> list[dict[str, Any]]:
    """Every message the agent wrote after what was read so far, to its end of output."""
    rest: list[dict[str, Any]] = []
    with anyio.fail_after(20):
        while True:
            try:
                rest.append(await agent.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return rest


def _permission_request(message: dict[str, Any]) -> bool:
    return message.get("method") == "session/request_permission"


def _started(call_id: str) -> Any:
    def started(message: dict[str, Any]) -> bool:
        update = message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
        return update.get("toolCallId") == call_id and update.get("status") == "in_progress"

    return started


@pytest.mark.parametrize("caught", ["waiting for permission", "running a command"])
async def test_no_update_of_a_cancelled_tool_prompt_follows_its_answer(tmp_path: Path, caught: str) -> None:
    target = tmp_path / "a.txt"
    target.write_text("before\n")
    if caught == "waiting for permission":
        call = ScriptedCall("write_file", {"path": "a.txt", "content": "after\n"}, id="c1")
    else:
        call = ScriptedCall("run_command", {"command": "sleep 1000"}, id="c1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((call,)))
        async with spawn_agent("--base-url", model.base_url, "--model", "m", "--no-persist") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
            prompt_id = await agent.request_nowait("session/prompt", prompt)
            asked, _ = await _until(agent, _permission_request)
            if caught == "running a command":
                allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                await agent.send({"jsonrpc": "2.0", "id": asked["id"], "result": allow})
                await _until(agent, _started("c1"))
            await agent.notify("session/cancel", {"sessionId": session_id})
            answer, before = await agent.until_response(prompt_id, timeout=20)
            if caught == "waiting for permission":  # the editor answers the cancelled request after all
                late = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                await agent.send({"jsonrpc": "2.0", "id": asked["id"], "result": late})
            _, after = await agent.until_response(await agent.request_nowait("session/list", {}), timeout=20)
            await agent.close_stdin()  # the agent ends once it has written everything it still had to say
            with anyio.fail_after(20):
                await agent.process.wait()
            after += await _rest(agent)
    assert answer["result"]["stopReason"] == "cancelled"
    finals = [
        m["params"]["update"]
        for m in before
        if m.get("method") == "session/update" and m["params"]["update"].get("toolCallId") == "c1"
    ]
    assert finals[-1]["status"] == "failed"  # the call ended before the prompt answered
    assert [m for m in after if m.get("method") == "session/update"] == []
    assert target.read_text() == "before\n"
