"""A client's system prompt over REST: ``POST /session`` and ``POST /session/{id}/resume`` take ``systemPrompt`` (the
same rule as ACP's, checked by the bridge): ``override`` replaces the agent's how-to-work text in what the model is
sent, a resume with ``append`` replaces it, an unsupported mode is 400 naming ``systemPrompt.mode`` and creates
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import DEFAULT_SYSTEM_PROMPT

from ._support import assert_documented, running_daemon
from .test_tools import TOKEN, until

pytestmark = pytest.mark.anyio


def _prompt(mode: str, text: str) -> dict[str, object]:
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


async def test_a_rest_session_is_created_and_resumed_with_a_client_system_prompt(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(Answer(text="one"), Answer(text="two"))
        assert "session.systemPrompt" in (await served.client.get("/capabilities")).json()["features"]
        body = {"cwd": str(tmp_path), "systemPrompt": _prompt("override", "Review only.")}
        response = await served.client.post("/session", json=body)
        assert response.status_code == 201, response.text
        assert_documented("POST", "/session", response)
        session_id = response.json()["sessionId"]
        async with served.events(session_id) as events:
            await served.prompt(session_id, "look")
            await until(events, "turn_complete")
        system = model.requests[-1].messages[0]["content"]
        assert system.startswith("Review only.\n\n") and DEFAULT_SYSTEM_PROMPT not in system

        resumed = await served.client.post(
            f"/session/{session_id}/resume", json={"systemPrompt": _prompt("append", "Answer briefly.")}
        )
        assert resumed.status_code == 200, resumed.text
        async with served.events(session_id) as events:
            await served.prompt(session_id, "again")
            await until(events, "turn_complete")
        system = model.requests[-1].messages[0]["content"]
        assert system.startswith(DEFAULT_SYSTEM_PROMPT) and system.endswith("\n\nAnswer briefly.")


async def test_an_unsupported_mode_is_400_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        body = {"cwd": str(tmp_path), "systemPrompt": _prompt("replace", "x")}
        response = await served.client.post("/session", json=body)
        assert response.status_code == 400
        assert_documented("POST", "/session", response)
        assert response.json()["details"][0]["field"] == "systemPrompt.mode"
        assert served.daemon.bridge.sessions == ()
        assert (await served.daemon.bridge.list_sessions()).sessions == ()
