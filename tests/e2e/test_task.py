"""Subagents through a real agent process and the scriptable model: a ``task`` whose child reads a file and
answers (the parent's model gets the answer alone, the editor sees the child's progress in the call), a cancel of
the parent stopping the child's request, and a writing child asking permission, named, of the same client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.provider.offline import Answer, HangAfterHeaders, LoopbackModel, ScriptedCall, ToolCalls

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _task(**args: Any) -> ToolCalls:
    return ToolCalls((ScriptedCall("task", {"description": "Find the version", **args}),))


def _updates(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in seen if m.get("method") == "session/update"]


async def test_a_child_reads_files_and_its_answer_is_the_result(tmp_path: Path) -> None:
    (tmp_path / "VERSION").write_text("4.2.0\n")
    async with LoopbackModel() as model:
        model.enqueue(
            _task(prompt="What version is in VERSION?"),
            ToolCalls((ScriptedCall("read_file", {"path": "VERSION"}),)),  # the child's first request
            Answer(text="The version is 4.2.0."),  # the child's answer
            Answer(text="It is 4.2.0."),  # the parent's
        )
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "which version?"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            reply, seen = await agent.until_response(msg_id, timeout=60)
        assert reply["result"]["stopReason"] == "end_turn", reply
        child_first = model.requests[1]
        assert "task" not in child_first.tool_names and "write_file" not in child_first.tool_names  # read-only
        assert [m["content"] for m in child_first.messages if m["role"] == "user"] == ["What version is in VERSION?"]
        [tool] = [m for m in model.requests[3].messages if m["role"] == "tool"]
        assert tool["content"] == "The version is 4.2.0."  # the parent's window pays for the answer only
        updates = _updates(seen)
        started = [u for u in updates if u["sessionUpdate"] == "tool_call"]
        assert [u["kind"] for u in started] == ["think"]  # one call in the parent: the child's are its progress
        calls = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
        progress = [c["content"]["text"] for u in calls for c in u.get("content") or [] if c["type"] == "content"]
        assert any("→ Read VERSION" in text for text in progress)
        final = [u for u in updates if u.get("status") == "completed"][-1]
        assert final["content"][-1]["content"]["text"] == "The version is 4.2.0."


async def test_cancelling_the_parent_stops_the_child(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(_task(prompt="Think forever."), HangAfterHeaders())
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "go"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            with anyio.fail_after(30):
                await model.wait_for_requests(2)  # the child's request is open
            await agent.notify("session/cancel", {"sessionId": session_id})
            reply, seen = await agent.until_response(msg_id, timeout=30)
            with anyio.fail_after(30):
                await model.wait_for_disconnects(1)  # the child's request was closed
        assert reply["result"]["stopReason"] == "cancelled", reply
        assert [u["status"] for u in _updates(seen) if u.get("status") in ("completed", "failed")] == ["failed"]


async def test_a_writing_child_asks_permission_of_the_same_client(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(
            _task(prompt="Write notes.txt", write=True),
            ToolCalls((ScriptedCall("write_file", {"path": "notes.txt", "content": "hi\n"}),)),
            Answer(text="Wrote notes.txt."),
            Answer(text="done"),
        )
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "notes"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            asked: list[dict[str, Any]] = []
            while True:
                message = await agent.receive(timeout=60)
                if message.get("method") == "session/request_permission":
                    asked.append(message["params"])
                    outcome = {"outcome": "selected", "optionId": "allow_once"}
                    await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
                elif message.get("id") == msg_id:
                    break
        assert message["result"]["stopReason"] == "end_turn", message
        [request] = asked
        assert request["sessionId"] == session_id
        assert request["toolCall"]["title"].startswith("[Find the version] Write")
        assert (tmp_path / "notes.txt").read_text() == "hi\n"
        [tool] = [m for m in model.requests[3].messages if m["role"] == "tool"]
        assert tool["content"] == "Wrote notes.txt."


async def test_ask_runs_a_subagent(tmp_path: Path) -> None:
    import os
    import sys

    (tmp_path / "VERSION").write_text("4.2.0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    async with LoopbackModel() as model:
        model.enqueue(
            _task(prompt="What version is in VERSION?"),
            ToolCalls((ScriptedCall("read_file", {"path": "VERSION"}),)),
            Answer(text="The version is 4.2.0.", reasoning=""),
            Answer(text="It is 4.2.0.", reasoning=""),
        )
        result = await anyio.run_process(
            [sys.executable, "-m", "acp_server", "ask", "--base-url", model.base_url, "which version?"],
            cwd=tmp_path,
            env=env,
            check=False,
        )
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    assert "→ Task: Find the version" in stderr  # ask's read-only mode offers task; the child reads
    assert result.stdout.decode() == "It is 4.2.0.\n"


def _two_tasks() -> ToolCalls:
    return ToolCalls(
        (
            ScriptedCall("task", {"description": "First", "prompt": "Do the first thing."}),
            ScriptedCall("task", {"description": "Second", "prompt": "Do the second thing."}),
        )
    )


async def test_two_tasks_of_one_answer_run_at_once_and_a_cancel_stops_both(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(_two_tasks(), HangAfterHeaders(), HangAfterHeaders())
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "go"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            with anyio.fail_after(30):
                await model.wait_for_requests(3)  # both children asked while neither has answered
            await agent.notify("session/cancel", {"sessionId": session_id})
            reply, seen = await agent.until_response(msg_id, timeout=30)
            with anyio.fail_after(30):
                await model.wait_for_disconnects(2)  # both children's requests were closed
        assert reply["result"]["stopReason"] == "cancelled", reply
        finals = [u for u in _updates(seen) if u.get("status") in ("completed", "failed")]
        assert [u["status"] for u in finals] == ["failed", "failed"]


async def test_concurrent_tasks_answer_in_the_order_they_were_called(tmp_path: Path) -> None:
    async with LoopbackModel() as model:
        model.enqueue(_two_tasks(), Answer(text="one done"), Answer(text="two done"), Answer(text="both done"))
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.initialize()
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "go"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            reply, _ = await agent.until_response(msg_id, timeout=60)
        assert reply["result"]["stopReason"] == "end_turn", reply
        got = {}  # which answer each child got (the model answers them in the order their requests arrived)
        for request, text in zip(model.requests[1:3], ("one done", "two done"), strict=True):
            [asked] = [m["content"] for m in request.messages if m["role"] == "user"]
            got[asked] = text
        tools = [m["content"] for m in model.requests[3].messages if m["role"] == "tool"]
        assert tools == [got["Do the first thing."], got["Do the second thing."]]
