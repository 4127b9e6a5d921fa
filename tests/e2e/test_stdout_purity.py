"""stdout carries JSON-RPC only, even with debug logging on; secrets appear in no log and no reply."""

from __future__ import annotations

import json

import pytest

from acp_server.provider.offline import LoopbackModel, NonSSE

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

SECRET = "sk-test-0123456789abcdef-SECRET"


async def test_debug_logging_keeps_stdout_pure_and_secrets_out() -> None:
    async with LoopbackModel() as model:
        model.enqueue(NonSSE())  # a failing turn: its error must not quote the key either
        args = ["--base-url", model.base_url, "--api-key", SECRET, "--model", "m", "--debug"]
        async with spawn_agent(*args) as agent:
            await agent.initialize()
            session_id = await agent.new_session()
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            failed = await agent.request("session/prompt", prompt, timeout=60)
            assert "error" in failed
            ok, updates = await agent.until_response(await agent.request_nowait("session/prompt", prompt))
            assert ok["result"]["stopReason"] == "end_turn"
            assert updates and all(u["method"] == "session/update" for u in updates)
            await agent.send_raw(b"not json\n")
            await agent.receive()
            await agent.close_stdin()
            assert await agent.process.wait() == 0
        assert model.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # the key was really used
    for line in agent.stdout_lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        assert {"id", "method"} & message.keys()
    stderr = agent.stderr.decode()
    assert " DEBUG " in stderr
    assert SECRET not in stderr
    assert SECRET.encode() not in b"\n".join(agent.stdout_lines)
