"""ACP's unstable ``session/set_title`` and ``session/status``, advertised in ``initialize`` (``sessionCapabilities``
``title`` and ``status``): the title set under ACP's name is answered and stored (also for a stored session this
process does not hold), the extension ``_acp-server/set_title`` still works; ``status`` says ``open`` or ``saved``
without attaching anything. Requests and answers valid against ``@agentclientprotocol/sdk@2.4.0``'s unstable schema.
A raw NDJSON client, real agent processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import LoopbackModel
from tests.acp_wire_schema import validate

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_set_title_and_status_by_their_acp_names(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
    async with LoopbackModel() as model:
        async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:
            init = await agent.initialize()
            validate("InitializeResponse", init["result"], unstable=True)
            capabilities = init["result"]["agentCapabilities"]["sessionCapabilities"]
            assert capabilities["title"] == {} and capabilities["status"] == {}
            session_id = await agent.new_session(str(tmp_path))
            asked = {"sessionId": session_id, "title": "  Fix the parser  "}
            validate("SetSessionTitleRequest", asked, unstable=True)
            reply, seen = await agent.until_response(await agent.request_nowait("session/set_title", asked))
            validate("SetSessionTitleResponse", reply["result"], unstable=True)
            assert reply["result"] == {"title": "Fix the parser"}  # trimmed: what was stored
            [told] = [m["params"]["update"] for m in seen]  # announced before the answer, as the extension does
            assert (told["sessionUpdate"], told["title"]) == ("session_info_update", "Fix the parser")
            empty = await agent.request("session/set_title", {"sessionId": session_id, "title": "   "})
            assert empty["error"]["code"] == -32602, empty
            old = await agent.request("_acp-server/set_title", {"sessionId": session_id, "title": "Old name"})
            assert old["result"] == {}
            status = await agent.request("session/status", {"sessionId": session_id})
            validate("SessionStatusResponse", status["result"], unstable=True)
            assert status["result"] == {"status": "open"}
            missing = await agent.request("session/status", {"sessionId": "nope"})
            assert missing["error"]["code"] == -32002 and missing["error"]["data"]["sessionId"] == "nope"

        async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:  # not in memory
            await agent.initialize()
            status = await agent.request("session/status", {"sessionId": session_id})
            assert status["result"] == {"status": "saved"}
            reply = await agent.request("session/set_title", {"sessionId": session_id, "title": "Renamed"})
            assert reply["result"] == {"title": "Renamed"}
            listed = await agent.request("session/list", {})
            [info] = [s for s in listed["result"]["sessions"] if s["sessionId"] == session_id]
            assert info["title"] == "Renamed"
            status = await agent.request("session/status", {"sessionId": session_id})
            assert status["result"] == {"status": "saved"}  # asking attached nothing
