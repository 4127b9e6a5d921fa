"""Logging never blocks serving: a client that never reads the agent's stderr still gets every answer."""

from __future__ import annotations

import anyio
import pytest

from ._agent import spawn_agent

pytestmark = pytest.mark.anyio

PROMPTS = 400
PER_SESSION = 50


@pytest.mark.timeout(180)
async def test_unread_stderr_pipe_never_stalls_a_debug_agent() -> None:
    # A pipe holds 64 KiB; --debug writes about 460 bytes a prompt (measured), so 400 prompts write nearly three
    # pipes' worth. Before the bounded log queue the agent blocked in its first write past the pipe's capacity (about
    # prompt 140) and stopped answering.
    async with spawn_agent("--offline", "--debug", read_stderr=False) as agent:
        await agent.initialize()
        for n in range(PROMPTS):
            if n % PER_SESSION == 0:  # a session's history grows with each turn: keep each request small
                session_id = await agent.new_session()
            params = {"sessionId": session_id, "prompt": [{"type": "text", "text": f"prompt {n}"}]}
            response = await agent.request("session/prompt", params, timeout=30)
            assert response.get("result", {}).get("stopReason") == "end_turn", (n, response)
        await agent.close_stdin()
        with anyio.fail_after(20):  # the writer may still be blocked on the full pipe: exit must not wait for it
            assert await agent.process.wait() == 0
