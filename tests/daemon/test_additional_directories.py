"""``additionalDirectories`` over REST: ``POST /session`` takes them (checked by the bridge's one rule: a bad entry is
400 naming it and creates nothing), the session answer reports them, tools reach the directory and nothing outside,
and ``POST /session/{id}/resume`` replaces them (absent: kept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import assert_documented, running_daemon
from .test_tools import TOKEN, call_updates, tool_messages, until

pytestmark = pytest.mark.anyio


async def test_a_rest_session_reads_its_additional_directory_and_nothing_outside(tmp_path: Path) -> None:
    project, extra, outside = tmp_path / "project", tmp_path / "extra", tmp_path / "outside"
    for directory in (project, extra, outside):
        directory.mkdir()
    (extra / "notes.txt").write_text("shared notes\n")
    (outside / "secret.txt").write_text("TOPSECRET\n")
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("read_file", {"path": str(extra / "notes.txt")}, id="r1"),
                    ScriptedCall("read_file", {"path": str(outside / "secret.txt")}, id="r2"),
                )
            ),
            Answer(text="read"),
        )
        assert "session.directories" in (await served.client.get("/capabilities")).json()["features"]
        body = {"cwd": str(project), "additionalDirectories": [str(extra), str(extra) + "/", str(project)]}
        response = await served.client.post("/session", json=body)
        assert response.status_code == 201, response.text
        assert_documented("POST", "/session", response)
        assert response.json()["additionalDirectories"] == [str(extra)]  # a repeat and the cwd itself dropped
        session_id = response.json()["sessionId"]
        async with served.events(session_id) as events:
            await served.prompt(session_id, "read both")
            seen = await until(events, "turn_complete")
        assert [call_updates(seen, call)[-1]["status"] for call in ("r1", "r2")] == ["completed", "failed"]
        messages = tool_messages(model, 1)
        assert "shared notes" in messages["r1"] and "TOPSECRET" not in messages["r2"]

        kept = await served.client.post(f"/session/{session_id}/resume", json={})
        assert kept.status_code == 200 and kept.json()["additionalDirectories"] == [str(extra)]
        replaced = await served.client.post(
            f"/session/{session_id}/resume", json={"additionalDirectories": [str(outside)]}
        )
        assert replaced.status_code == 200, replaced.text
        assert_documented("POST", "/session/{sessionId}/resume", replaced)
        assert replaced.json()["additionalDirectories"] == [str(outside)]
        cleared = await served.client.post(f"/session/{session_id}/resume", json={"additionalDirectories": []})
        assert cleared.status_code == 200 and "additionalDirectories" not in cleared.json()


async def test_a_bad_entry_is_400_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        body = {"cwd": str(tmp_path), "additionalDirectories": [str(tmp_path), str(tmp_path / "missing")]}
        response = await served.client.post("/session", json=body)
        assert response.status_code == 400
        assert_documented("POST", "/session", response)
        assert response.json()["details"] == [{"field": "additionalDirectories[1]", "message": "does not exist"}]
        assert response.json()["error"].startswith("additionalDirectories[1]: does not exist, got ")
        assert served.daemon.bridge.sessions == ()
        assert (await served.daemon.bridge.list_sessions()).sessions == ()
