"""``POST /session/{id}/rewind`` and the SDK's ``DaemonClient.rewind``: the prompts, a preview with its diff, the
rewind, and a conflict as 409 ``rewind_conflict`` — real daemon, real files, the scriptable loopback model."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.client import DaemonClient, DaemonInvalidRequestError
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import assert_documented, running_daemon

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
ROUTE = "/session/{sessionId}/rewind"


async def test_the_route_and_the_sdk_list_preview_and_rewind(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("A\n")
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "changed\n"}, id="w1"),)),
            Answer(text="done"),
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "again\n"}, id="w2"),)),
            Answer(text="done"),
        )
        async with running_daemon(model, token=TOKEN) as served, DaemonClient(served.url, token=TOKEN) as client:
            created = await served.client.post("/session", json={"cwd": str(project), "modeId": "accept-edits"})
            session_id = created.json()["sessionId"]
            path = ROUTE.replace("{sessionId}", session_id)
            assert (await served.prompt(session_id, "change a", wait="true")).status_code == 200
            listed = await served.client.post(path, json={})
            assert_documented("POST", ROUTE, listed)
            assert listed.json() == {"prompts": [{"number": 1, "firstLine": "change a", "files": ["a.txt"]}]}
            shown = await served.client.post(path, json={"prompt": 1, "preview": True})
            assert_documented("POST", ROUTE, shown)
            assert "-changed\n+A\n" in shown.json()["files"][0]["diff"]
            done = await client.rewind(session_id, 1)
            assert done["restored"] == ["a.txt"] and done["conversationRewound"] is True
            assert (project / "a.txt").read_text() == "A\n"
            assert (await client.rewind(session_id)) == {"prompts": []}
            assert (await served.prompt(session_id, "change a again", wait="true")).status_code == 200
            (project / "a.txt").write_text("the user's\n")
            refused = await served.client.post(path, json={"prompt": 1})
            assert refused.status_code == 409 and refused.json()["code"] == "rewind_conflict"
            assert refused.json()["conflicts"] == ["a.txt"]
            assert_documented("POST", ROUTE, refused)
            with pytest.raises(DaemonInvalidRequestError):
                await client.rewind(session_id, 5)
            assert (await client.rewind(session_id, 1, force=True))["restored"] == ["a.txt"]
            assert (project / "a.txt").read_text() == "A\n"
