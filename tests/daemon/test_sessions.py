"""Sessions over HTTP: created journaled (like ACP ``session/new``), detached by DELETE, resumed without replay,
removed for good by ``POST /session/{id}/delete``."""

from __future__ import annotations

import pytest

from acp_server.provider.offline import Answer, HangAfterHeaders, LoopbackModel

from ._support import assert_documented, running_daemon

pytestmark = pytest.mark.anyio

RESUME = "/session/{sessionId}/resume"
DELETE = "/session/{sessionId}/delete"


async def test_a_deleted_session_can_be_resumed_and_keeps_its_conversation() -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        model.enqueue(Answer(text="first answer"), Answer(text="second answer"))
        session_id = await served.new_session("/work")
        assert (await served.prompt(session_id, "remember this", wait="true")).status_code == 200
        assert (await served.client.delete(f"/session/{session_id}")).status_code == 204
        assert (await served.prompt(session_id)).status_code == 404  # detached

        resumed = await served.client.post(f"/session/{session_id}/resume", json={"cwd": "/elsewhere"})
        assert resumed.status_code == 200
        assert resumed.json() == {"sessionId": session_id, "modeId": "read-only", "modelId": "m"}
        assert_documented("POST", RESUME, resumed)
        assert served.bridge.get(session_id).cwd == "/elsewhere"
        again = await served.client.post(f"/session/{session_id}/resume", json={})  # attached: a no-op
        assert again.status_code == 200

        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "and now?")).status_code == 202
            seen = await events.until(lambda e: e.event == "turn_complete")
        assert seen[0].event == "prompt_accepted"  # no history replayed on resume
        sent = model.requests[-1].body["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"][-2:] == ["remember this", "and now?"]
        assert any(m["role"] == "assistant" and m["content"] == "first answer" for m in sent)


async def test_resume_errors() -> None:
    async with running_daemon(None) as served:
        unknown = await served.client.post("/session/nope/resume", json={})
        assert unknown.status_code == 404 and unknown.json()["code"] == "session_not_found"
        assert_documented("POST", RESUME, unknown)
        session_id = await served.new_session()
        for body in ({"cwd": "relative"}, {"cwd": 1}, {"sessionId": session_id}):
            response = await served.client.post(f"/session/{session_id}/resume", json=body)
            assert response.status_code == 400, body
            assert_documented("POST", RESUME, response)


async def test_capabilities_list_resume_but_not_load() -> None:
    async with running_daemon(None) as served:
        features = (await served.client.get("/capabilities")).json()["features"]
    assert "session.resume" in features and "session.load" not in features


async def test_post_delete_cancels_the_running_prompt_and_removes_the_session_for_good() -> None:
    async with LoopbackModel() as model:
        model.enqueue(HangAfterHeaders())
        async with running_daemon(model) as served:
            session_id = await served.new_session()
            kept = await served.new_session()
            async with served.events(session_id) as events:
                running = (await served.prompt(session_id)).json()["promptId"]
                await model.wait_for_requests(1)
                deleted = await served.client.post(f"/session/{session_id}/delete")
                assert deleted.status_code == 204
                assert_documented("POST", DELETE, deleted)
                seen = await events.until_ended()
            assert [e.event for e in seen[-2:]] == ["turn_error", "session_closed"]
            assert seen[-2].data["promptId"] == running and seen[-2].data["code"] == "session_closed"
            assert await served.bridge.store.get_session(session_id) is None  # history gone, not just detached
            assert await served.bridge.store.get_session(kept) is not None
            for response in (
                await served.client.post(f"/session/{session_id}/resume", json={}),
                await served.client.post(f"/session/{session_id}/delete"),
                await served.client.post("/session/never-was/delete"),
            ):
                assert response.status_code == 404 and response.json()["code"] == "session_not_found"
            assert_documented("POST", DELETE, response)
            features = (await served.client.get("/capabilities")).json()["features"]
            assert "session.remove" in features
