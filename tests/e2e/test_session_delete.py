"""``session/delete`` over real pipes on a real SQLite state directory: the running prompt is cancelled and answered
first, the session is gone from the list at once and, for a new process on the same directory, from the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, SlowDrip

from .test_sessions_durable import _ask, _prompt, spawn

pytestmark = pytest.mark.anyio


async def test_delete_cancels_the_running_prompt_and_removes_the_session_for_every_process(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="kept"), SlowDrip(interval_s=0.02, text="partial " * 1000))
        args = ("--state-dir", state, "--base-url", model.base_url, "--model", "m")
        async with spawn(*args, home=tmp_path) as agent:
            capabilities = (await agent.initialize())["result"]["agentCapabilities"]
            assert capabilities["sessionCapabilities"]["delete"] == {}
            kept = await agent.new_session("/w")
            assert (await _ask(agent, kept, "stay"))["result"]["stopReason"] == "end_turn"
            session_id = await agent.new_session("/w")
            running = await agent.request_nowait("session/prompt", _prompt(session_id, "go"))
            while "content" not in (await agent.receive())["params"]["update"]:
                pass  # until the turn streams
            deleted = await agent.request_nowait("session/delete", {"sessionId": session_id})
            reply, _ = await agent.until_response(running)
            assert reply["error"]["data"]["errorKind"] == "session_closed"  # answered before the delete
            reply, _ = await agent.until_response(deleted)
            assert reply["result"] == {}
            listed = (await agent.request("session/list", {}))["result"]["sessions"]
            assert [s["sessionId"] for s in listed] == [kept]
        async with spawn(*args, home=tmp_path) as again:
            await again.initialize()
            for method, params in [
                ("session/load", {"sessionId": session_id, "cwd": "/w", "mcpServers": []}),
                ("session/delete", {"sessionId": session_id}),
            ]:
                error = (await again.request(method, params))["error"]
                assert error["code"] == -32002, method
                assert error["data"]["errorKind"] == "session_not_found"
            listed = (await again.request("session/list", {}))["result"]["sessions"]
            assert [s["sessionId"] for s in listed] == [kept]
