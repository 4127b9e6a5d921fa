"""The mode wins over a pending permission request over REST: a switch to ``read-only`` withdraws it (published as
``permission_request_ended`` ``withdrawn``, the call ends ``failed``, a late answer is 404 and writes nothing);
every request's end is published once."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import Served, running_daemon
from .test_tools import TOKEN, answer, call_updates, new_session, tool_messages, until

pytestmark = pytest.mark.anyio


async def test_a_switch_to_read_only_withdraws_the_pending_request_and_a_late_allow_writes_nothing(
    tmp_path: Path,
) -> None:
    async with LoopbackModel() as model, running(model) as served:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)), Answer(text="ok")
        )
        session_id = await new_session(served, tmp_path)
        async with served.events(session_id) as events:
            prompt_id = (await served.prompt(session_id, "write a")).json()["promptId"]
            request = (await until(events, "permission_request"))[-1].data
            switched = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "read-only"})
            assert switched.status_code == 200
            ended = await until(events, "permission_request_ended")
            after = await until(events, "turn_complete")
        assert ended[-1].data == {
            "sessionId": session_id,
            "promptId": prompt_id,
            "requestId": request["requestId"],
            "outcome": "withdrawn",
        }
        assert [e.event for e in ended[:-1]] == ["mode_changed", "config_changed"]  # withdrawn at the switch
        assert call_updates(after, "w1")[-1]["status"] == "failed"
        assert after[-1].data["stopReason"] == "end_turn"  # the prompt went on
        assert "switched to the 'read-only' mode" in tool_messages(model, 1)["w1"]
        late = await answer(served, session_id, request["requestId"], "allow_once")
        assert late.status_code == 404
        assert not (tmp_path / "a.txt").exists()


async def test_an_answered_request_and_a_cancelled_one_each_publish_their_end_once(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running(model) as served:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)),
            Answer(text="ok"),
            ToolCalls((ScriptedCall("write_file", {"path": "b.txt", "content": "B"}, id="w2"),)),
        )
        session_id = await new_session(served, tmp_path)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "write a")
            first = (await until(events, "permission_request"))[-1].data
            assert (await answer(served, session_id, first["requestId"], "allow_once")).status_code == 204
            seen = await until(events, "turn_complete")
            await served.prompt(session_id, "write b")
            second = (await until(events, "permission_request"))[-1].data
            assert (await served.client.post(f"/session/{session_id}/cancel")).status_code == 204
            seen += await until(events, "turn_complete")
        ends = [(e.data["requestId"], e.data["outcome"]) for e in seen if e.event == "permission_request_ended"]
        assert ends == [(first["requestId"], "answered"), (second["requestId"], "withdrawn")]
        assert (tmp_path / "a.txt").read_text() == "A" and not (tmp_path / "b.txt").exists()


def running(model: LoopbackModel) -> AbstractAsyncContextManager[Served]:
    return running_daemon(model, token=TOKEN)
