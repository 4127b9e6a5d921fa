"""Plan operations (ACP's unstable ``plan_update`` / ``plan_removed``) for a client that advertised ``plan``: the
session's one plan under a stable ``planId``, removed when the model clears it; replayed alike by ``session/load``
in another process. A client that advertises nothing gets the legacy ``plan`` updates. Every update valid against
``@agentclientprotocol/sdk@2.4.0``'s unstable schema. A raw NDJSON client, a real agent process, the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_wire_schema import updates, validate_update

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ENTRIES = [{"content": "read the code", "priority": "high", "status": "in_progress"}]
PLAN_KINDS = ("plan", "plan_update", "plan_removed")


def _plans(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates(seen) if u["sessionUpdate"] in PLAN_KINDS]


@pytest.mark.parametrize("advertised", [True, False], ids=["plan", "nothing"])
async def test_a_plan_is_updated_then_removed_by_id(tmp_path: Path, advertised: bool) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
    capabilities = {"plan": {}} if advertised else {}
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("update_plan", {"entries": ENTRIES}, id="p1"),)),
            Answer(text="planned", reasoning=""),
            ToolCalls((ScriptedCall("update_plan", {"entries": []}, id="p2"),)),
            Answer(text="done", reasoning=""),
        )
        args = ("--base-url", model.base_url, "--model", "m")
        async with spawn_agent(*args, env=env) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
            session_id = await agent.new_session(str(tmp_path))
            await agent.request("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})
            live: list[dict[str, Any]] = []
            for text in ("plan it", "clear it"):
                prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
                reply, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt), 20)
                assert reply["result"]["stopReason"] == "end_turn", reply
                live += seen
        async with spawn_agent(*args, env=env) as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
            load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            reply, replayed = await agent.until_response(await agent.request_nowait("session/load", load), 20)
            assert "result" in reply, reply
    for message in live + replayed:
        validate_update(message["params"], unstable=True)
    wire = [{"content": "read the code", "priority": "high", "status": "in_progress"}]
    if advertised:
        plan_id = f"{session_id}/plan"
        expected = [
            {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": plan_id, "entries": wire}},
            {"sessionUpdate": "plan_removed", "planId": plan_id},
        ]
    else:
        expected = [{"sessionUpdate": "plan", "entries": wire}, {"sessionUpdate": "plan", "entries": []}]
    assert _plans(live) == expected
    assert _plans(replayed) == expected
