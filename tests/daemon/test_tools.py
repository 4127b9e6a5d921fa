"""Tools over REST + SSE: ``tool_call`` events, permission requests answered over HTTP, modes, the safe default.

Real daemon (in process: uvicorn on 127.0.0.1), real tools on a temporary project, the scriptable loopback model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionEntry
from acp_server.config import Settings
from acp_server.daemon import PERMISSION_OPTIONS, Daemon, DaemonOptions
from acp_server.domain import Emit, Prompt, StopReason
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import ToolClient

from ._support import Event, EventReader, Served, assert_documented, running_daemon
from .test_acp_http import RawAcp

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
READ_TOOLS = ["read_file", "list_directory", "glob", "grep", "task", "skill", "update_plan"]  # the plan changes nothing
ALL_TOOLS = [*READ_TOOLS[:4], "write_file", "edit_file", "run_command", "web_fetch", "task", "skill", "update_plan"]


def _without_skill(names: list[str]) -> list[str]:
    """What a session without skills is offered of ``names``: ``skill`` only where skills are found."""
    return [name for name in names if name != "skill"]
ORIGINAL = "def main():\n    return 'on disk'\n"
EDITED = "def main():\n    return 'edited'\n"
EDIT = {"path": "src/app.py", "old_text": "'on disk'", "new_text": "'edited'"}
ANSWER_ROUTE = "/session/{sessionId}/permission/{requestId}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(ORIGINAL)
    return root


def call_updates(events: list[Event], call_id: str) -> list[dict[str, Any]]:
    """The ``update`` of every ``tool_call`` event about ``call_id``, in order."""
    return [e.data["update"] for e in events if e.event == "tool_call" and e.data["update"]["toolCallId"] == call_id]


def tool_messages(model: LoopbackModel, request: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.requests[request].messages if m.get("role") == "tool"}


async def new_session(served: Served, cwd: Path, mode_id: str | None = None) -> str:
    body: dict[str, Any] = {"cwd": str(cwd)}
    if mode_id is not None:
        body["modeId"] = mode_id
    response = await served.client.post("/session", json=body)
    assert response.status_code == 201, response.text
    assert_documented("POST", "/session", response)
    session_id: str = response.json()["sessionId"]
    return session_id


async def answer(served: Served, session_id: str, request_id: str, option_id: str) -> Any:
    response = await served.client.post(f"/session/{session_id}/permission/{request_id}", json={"optionId": option_id})
    assert_documented("POST", ANSWER_ROUTE, response)
    return response


async def until(events: EventReader, name: str) -> list[Event]:
    return await events.until(lambda e: e.event == name, timeout=10)


# -- the safe default ---------------------------------------------------------------------------------------------


async def test_a_tokenless_daemon_offers_only_read_tools_and_never_asks(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        capabilities = (await served.client.get("/capabilities")).json()
        assert capabilities["modes"]["defaultModeId"] == "read-only"
        assert [m["id"] for m in capabilities["modes"]["availableModes"]] == ["read-only"]
        assert capabilities["modes"]["availableModes"][0]["tools"] == READ_TOOLS
        assert capabilities["tools"] == READ_TOOLS
        for mode in ("default", "accept-edits", "bypass-permissions", "nonsense"):
            refused = await served.client.post("/session", json={"cwd": str(project), "modeId": mode})
            assert refused.status_code == 400 and refused.json()["details"][0]["field"] == "modeId"
            assert_documented("POST", "/session", refused)
        session_id = await new_session(served, project)
        switched = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "default"})
        assert switched.status_code == 400 and "not offered" in switched.json()["error"]
        assert_documented("POST", "/session/{sessionId}/mode", switched)

        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("read_file", {"path": "src/app.py"}, id="r1"),
                    ScriptedCall("write_file", {"path": "new.txt", "content": "x"}, id="w1"),
                )
            ),
            Answer(text="read it"),
        )
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "read src/app.py")).status_code == 202
            seen = await until(events, "turn_complete")
        assert model.requests[0].tool_names == _without_skill(READ_TOOLS)  # edit and execute tools never offered
        statuses = [u["status"] for u in call_updates(seen, "r1") if "status" in u]  # not the updates while streaming
        assert statuses == ["pending", "in_progress", "completed"]
        assert call_updates(seen, "w1")[-1]["status"] == "failed"  # not offered: refused, never asked
        assert "permission_request" not in [e.event for e in seen]
        kinds = {e.data["update"]["sessionUpdate"] for e in seen if e.event == "session_update"}
        assert not kinds & {"tool_call", "tool_call_update"}  # tool calls travel as tool_call events only
        assert not (project / "new.txt").exists()
        assert "on disk" in tool_messages(model, 1)["r1"]

        # /acp on the same daemon serves the same bridge: read-only only.
        acp = RawAcp(served)
        await acp.initialize()
        async with acp.stream() as connection_stream:
            message = acp.message("session/new", {"cwd": str(project), "mcpServers": []})
            assert (await acp.post(message)).status_code == 202
            (created,) = await connection_stream.until_response(message["id"])
        modes = created["result"]["modes"]
        assert modes["currentModeId"] == "read-only"
        assert [m["id"] for m in modes["availableModes"]] == ["read-only"]


async def test_modes_with_a_token_and_bypass_only_when_allowed(project: Path) -> None:
    async with running_daemon(None, token=TOKEN) as served:
        capabilities = (await served.client.get("/capabilities")).json()
        assert capabilities["modes"]["defaultModeId"] == "default"
        available = capabilities["modes"]["availableModes"]
        assert [m["id"] for m in available] == ["default", "accept-edits", "read-only"]
        assert [m["tools"] for m in available] == [ALL_TOOLS, ALL_TOOLS, READ_TOOLS]
        assert capabilities["tools"] == ALL_TOOLS
        refused = await served.client.post("/session", json={"cwd": str(project), "modeId": "bypass-permissions"})
        assert refused.status_code == 400
    settings = Settings(allow_bypass_permissions=True)
    async with running_daemon(None, settings=settings, token=TOKEN) as served:
        capabilities = (await served.client.get("/capabilities")).json()
        assert [m["id"] for m in capabilities["modes"]["availableModes"]][-1] == "bypass-permissions"
        session_id = await new_session(served, project, "bypass-permissions")
        resumed = await served.client.post(f"/session/{session_id}/resume", json={})
        assert resumed.json() == {"sessionId": session_id, "modeId": "bypass-permissions", "modelId": "gpt-4o-mini"}


async def test_a_new_sessions_mode_is_stored_so_a_restart_with_another_default_keeps_it(
    project: Path, tmp_path: Path
) -> None:
    stored = Settings(state_dir=str(tmp_path / "state"))
    async with running_daemon(None, settings=stored, token=TOKEN) as served:  # default "default"
        plain = await new_session(served, project)  # no modeId
        null = (await served.client.post("/session", json={"cwd": str(project), "modeId": None})).json()
        assert null["modeId"] == "default"
    bypassing = replace(stored, default_mode="bypass-permissions", allow_bypass_permissions=True)
    async with running_daemon(None, settings=bypassing, token=TOKEN) as served:
        for session_id in (plain, null["sessionId"]):
            resumed = await served.client.post(f"/session/{session_id}/resume", json={})
            assert resumed.json()["modeId"] == "default"
            assert served.bridge.get(session_id).mode == "default"  # what the turn applies
        fresh = await new_session(served, project)
        assert served.daemon.current_mode(fresh) == "bypass-permissions"
    async with running_daemon(None, settings=stored, token=TOKEN) as served:  # bypass no longer offered
        resumed = await served.client.post(f"/session/{fresh}/resume", json={})
        assert resumed.json()["modeId"] == "default"  # a stored mode not offered reads as the default
        assert served.bridge.get(fresh).mode == "default"
    async with running_daemon(None, settings=stored) as served:  # tokenless: read-only only
        resumed = await served.client.post(f"/session/{plain}/resume", json={})
        assert resumed.json()["modeId"] == "read-only"
        assert served.bridge.get(plain).mode == "read-only"
    async with running_daemon(None, settings=bypassing, token=TOKEN) as served:  # both kept in the store
        assert (await served.client.post(f"/session/{plain}/resume", json={})).json()["modeId"] == "default"
        assert (await served.client.post(f"/session/{fresh}/resume", json={})).json()["modeId"] == "bypass-permissions"


async def test_a_tokenless_daemon_refuses_a_bridge_that_offers_more_than_read_only() -> None:
    async def runner(session: SessionEntry, prompt: Prompt, emit: Emit, client: ToolClient | None) -> StopReason:
        raise AssertionError("no turn runs")

    async with SessionBridge(runner) as bridge:  # every mode, default "default"
        with pytest.raises(ValueError, match="read-only"):
            Daemon(bridge, DaemonOptions())
        Daemon(bridge, DaemonOptions(token=TOKEN))  # with a token it may
    async with SessionBridge(runner, modes=["read-only"]) as bridge:  # the right modes, the wrong default
        with pytest.raises(ValueError, match="read-only"):
            Daemon(bridge, DaemonOptions())


# -- permission round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
async def test_an_edit_waits_for_its_permission_request_and_follows_the_answer(project: Path, option: str) -> None:
    app = project / "src" / "app.py"
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)), Answer(text="done"))
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            prompt_id = (await served.prompt(session_id, "edit app.py")).json()["promptId"]
            before = await until(events, "permission_request")
            request = before[-1].data
            # The request comes after its call's announcement, and nothing ran before the answer.
            assert [u["status"] for u in call_updates(before, "e1") if "status" in u] == ["pending"]
            assert (request["sessionId"], request["promptId"]) == (session_id, prompt_id)
            tool_call = request["toolCall"]
            assert (tool_call["toolCallId"], tool_call["kind"], tool_call["status"]) == ("e1", "edit", "pending")
            assert tool_call["content"] == [
                {"type": "diff", "path": str(app), "oldText": ORIGINAL, "newText": EDITED}
            ]
            assert request["options"] == list(PERMISSION_OPTIONS)
            assert app.read_text() == ORIGINAL
            unknown = await answer(served, session_id, request["requestId"], "maybe")
            assert unknown.status_code == 400 and unknown.json()["details"][0]["field"] == "optionId"
            answered = await answer(served, session_id, request["requestId"], option)  # still pending: answerable
            assert answered.status_code == 204
            after = await until(events, "turn_complete")
        assert after[-1].data["stopReason"] == "end_turn"
        final = call_updates(after, "e1")[-1]["status"]
        if option == "allow_once":
            assert (final, app.read_text()) == ("completed", EDITED)
        else:
            assert (final, app.read_text()) == ("failed", ORIGINAL)
            assert "declined" in tool_messages(model, 1)["e1"]
        late = await answer(served, session_id, request["requestId"], "allow_once")
        assert late.status_code == 404
        assert late.json() == {
            "code": "permission_request_not_found",
            "error": late.json()["error"],
            "sessionId": session_id,
            "requestId": request["requestId"],
        }


@pytest.mark.parametrize("option", ["allow_once", "reject_once"])
async def test_a_command_runs_in_the_session_cwd_only_when_allowed(project: Path, option: str) -> None:
    command = {"command": "pwd > where.txt && echo ran-$((6*7))"}
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("run_command", command, id="c1"),)), Answer(text="done"))
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "run it")
            request = (await until(events, "permission_request"))[-1].data
            assert request["toolCall"]["kind"] == "execute"
            assert not (project / "where.txt").exists()
            assert (await answer(served, session_id, request["requestId"], option)).status_code == 204
            after = await until(events, "turn_complete")
        output = tool_messages(model, 1)["c1"]
        if option == "allow_once":
            assert call_updates(after, "c1")[-1]["status"] == "completed"
            assert (project / "where.txt").read_text().strip() == str(project)
            assert "ran-42" in output
        else:
            assert call_updates(after, "c1")[-1]["status"] == "failed"
            assert not (project / "where.txt").exists()
            assert "declined" in output


async def test_a_daemon_prompt_gets_a_tool_client_with_the_permission_part_only_and_its_tools_work_locally(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's client is no editor: its ``ToolClient`` has no reader, writer or terminal (the tools read, write
    and run on the daemon's host), and its permission part asks over the event stream."""
    app = project / "src" / "app.py"
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        given: list[ToolClient | None] = []
        send_prompt = served.bridge.send_prompt

        def recording(*args: Any, **kwargs: Any) -> Any:
            given.append(kwargs.get("client"))
            return send_prompt(*args, **kwargs)

        monkeypatch.setattr(served.bridge, "send_prompt", recording)
        model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)), Answer(text="done"))
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "edit app.py")
            request = (await until(events, "permission_request"))[-1].data
            assert (await answer(served, session_id, request["requestId"], "allow_once")).status_code == 204
            after = await until(events, "turn_complete")
    [client] = given
    assert client is not None
    assert (client.reader, client.writer, client.terminal) == (None, None, None)
    assert call_updates(after, "e1")[-1]["status"] == "completed"
    assert app.read_text() == EDITED  # written here, on disk


async def test_a_read_in_default_mode_does_not_ask(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "src/app.py"}, id="r1"),)), Answer(text="ok"))
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "read")
            seen = await until(events, "turn_complete")
        assert model.requests[0].tool_names == _without_skill(ALL_TOOLS)
        assert "permission_request" not in [e.event for e in seen]
        assert call_updates(seen, "r1")[-1]["status"] == "completed"


async def test_an_unanswered_request_waits_until_the_prompt_is_cancelled(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)))
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "write a")
            first = (await until(events, "permission_request"))[-1].data
            cancelled = await served.client.post(f"/session/{session_id}/cancel")
            assert cancelled.status_code == 204
            after = await until(events, "turn_complete")
            assert after[-1].data["stopReason"] == "cancelled"
            assert call_updates(after, "w1")[-1]["status"] == "failed"
            assert (await answer(served, session_id, first["requestId"], "allow_once")).status_code == 404
            assert not (project / "a.txt").exists()
            # The next prompt's call asks again (the cancelled wait left nothing pending behind).
            model.enqueue(
                ToolCalls((ScriptedCall("write_file", {"path": "b.txt", "content": "B"}, id="w2"),)), Answer(text="ok")
            )
            await served.prompt(session_id, "write b")
            second = (await until(events, "permission_request"))[-1].data
            assert second["requestId"] != first["requestId"]
            assert (await answer(served, session_id, second["requestId"], "allow_once")).status_code == 204
            assert (await until(events, "turn_complete"))[-1].data["stopReason"] == "end_turn"
        assert (project / "b.txt").read_text() == "B"


async def test_an_unanswered_request_ends_at_the_prompt_deadline(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)))
        session_id = await new_session(served, project)
        body = {"prompt": [{"type": "text", "text": "write a"}], "deadlineMs": 1500}
        async with served.events(session_id) as events:
            assert (await served.client.post(f"/session/{session_id}/prompt", json=body)).status_code == 202
            request = (await until(events, "permission_request"))[-1].data
            after = await until(events, "turn_error")
        assert after[-1].data["code"] == "prompt_deadline_exceeded"
        assert call_updates(after, "w1")[-1]["status"] == "failed"
        assert (await answer(served, session_id, request["requestId"], "allow_once")).status_code == 404
        assert not (project / "a.txt").exists()


async def test_a_wait_true_prompt_is_answered_on_the_stream_and_allow_always_holds(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)),
            ToolCalls((ScriptedCall("write_file", {"path": "b.txt", "content": "B"}, id="w2"),)),
            Answer(text="both written"),
        )
        session_id = await new_session(served, project)
        result: dict[str, Any] = {}
        async with served.events(session_id) as events, anyio.create_task_group() as tg:

            async def wait_for_it() -> None:
                response = await served.prompt(session_id, "write two", wait="true")
                result.update(response.json())

            tg.start_soon(wait_for_it)
            request = (await until(events, "permission_request"))[-1].data
            assert (await answer(served, session_id, request["requestId"], "allow_always")).status_code == 204
            seen = await until(events, "turn_complete")
        assert result["stopReason"] == "end_turn"
        assert [e.event for e in seen].count("permission_request") == 0  # the second write did not ask
        assert [(project / n).read_text() for n in ("a.txt", "b.txt")] == ["A", "B"]


async def test_an_answer_naming_another_request_of_the_session_is_404_and_the_pending_one_stays(
    project: Path,
) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)),
            ToolCalls((ScriptedCall("write_file", {"path": "b.txt", "content": "B"}, id="w2"),)),
            Answer(text="ok"),
        )
        session_id = await new_session(served, project)
        async with served.events(session_id) as events:
            await served.prompt(session_id, "write a and b")
            first = (await until(events, "permission_request"))[-1].data
            assert (await answer(served, session_id, first["requestId"], "reject_once")).status_code == 204
            second = (await until(events, "permission_request"))[-1].data
            for stale in (first["requestId"], "no-such-request"):  # answered already / never issued
                refused = await answer(served, session_id, stale, "allow_once")
                assert refused.status_code == 404 and refused.json()["code"] == "permission_request_not_found"
                assert refused.json()["requestId"] == stale
            assert not (project / "b.txt").exists()  # the pending request was not answered by them
            assert (await answer(served, session_id, second["requestId"], "allow_once")).status_code == 204
            assert (await until(events, "turn_complete"))[-1].data["stopReason"] == "end_turn"
        assert not (project / "a.txt").exists()
        assert (project / "b.txt").read_text() == "B"


async def test_tools_over_rest_are_confined_to_the_session_cwd(project: Path) -> None:
    (project.parent / "secret.txt").write_text("TOPSECRET")
    escape = {"path": "../escaped.txt", "content": "E"}
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(
            ToolCalls(
                (
                    ScriptedCall("read_file", {"path": "../secret.txt"}, id="r1"),
                    ScriptedCall("write_file", escape, id="w1"),
                )
            ),
            Answer(text="refused"),
        )
        session_id = await new_session(served, project, "default")
        async with served.events(session_id) as events:
            await served.prompt(session_id, "read and write outside")
            seen = await until(events, "turn_complete")
        assert [call_updates(seen, call)[-1]["status"] for call in ("r1", "w1")] == ["failed", "failed"]
        assert "permission_request" not in [e.event for e in seen]  # refused before anyone is asked
        messages = tool_messages(model, 1)
        assert all("outside the project directory" in messages[call] for call in ("r1", "w1"))
        assert "TOPSECRET" not in messages["r1"]
        assert not (project.parent / "escaped.txt").exists()


# -- sessions stay apart --------------------------------------------------------------------------------------------


async def test_an_answer_for_another_sessions_request_is_404_and_changes_nothing(project: Path) -> None:
    app = project / "src" / "app.py"
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)), Answer(text="done"))
        first, second = await new_session(served, project), await new_session(served, project)
        async with served.events(first) as events:
            await served.prompt(first, "edit")
            request = (await until(events, "permission_request"))[-1].data
            wrong = await answer(served, second, request["requestId"], "allow_once")
            assert wrong.status_code == 404 and wrong.json()["code"] == "permission_request_not_found"
            assert wrong.json()["sessionId"] == second
            unknown = await answer(served, "no-such-session", request["requestId"], "allow_once")
            assert unknown.status_code == 404 and unknown.json()["code"] == "session_not_found"
            assert app.read_text() == ORIGINAL
            assert served.daemon.event_log(second).published == 0  # the other session saw nothing
            # Still pending in its own session: the right answer goes through.
            assert (await answer(served, first, request["requestId"], "allow_once")).status_code == 204
            assert (await until(events, "turn_complete"))[-1].data["stopReason"] == "end_turn"
        assert app.read_text() == EDITED
        assert served.daemon.event_log(second).published == 0


async def test_one_session_waiting_on_permission_does_not_hold_another(project: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        waiting, free = await new_session(served, project), await new_session(served, project)
        model.enqueue(ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)))
        async with served.events(waiting) as events:
            await served.prompt(waiting, "write")
            request = (await until(events, "permission_request"))[-1].data
            model.enqueue(Answer(text="free to stream"))
            async with served.events(free) as free_events:
                response = await served.prompt(free, "hello", wait="true")
                assert response.json()["stopReason"] == "end_turn"
                streamed = await until(free_events, "turn_complete")
            text = "".join(
                e.data["update"]["content"]["text"]
                for e in streamed
                if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            assert text == "free to stream"
            assert not (project / "a.txt").exists()  # the first one still waits
            model.enqueue(Answer(text="written"))
            assert (await answer(served, waiting, request["requestId"], "allow_once")).status_code == 204
            assert (await until(events, "turn_complete"))[-1].data["stopReason"] == "end_turn"
        assert (project / "a.txt").read_text() == "A"


# -- modes over REST ------------------------------------------------------------------------------------------------


async def test_a_mode_change_is_published_stored_and_applies_to_the_next_call(project: Path) -> None:
    app = project / "src" / "app.py"
    async with LoopbackModel() as model, running_daemon(model, token=TOKEN) as served:
        session_id = await new_session(served, project, "read-only")
        async with served.events(session_id) as events:
            same = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "read-only"})
            # No change: no event.
            assert same.json() == {"sessionId": session_id, "modeId": "read-only", "modelId": "m"}
            changed = await served.client.post(f"/session/{session_id}/mode", json={"modeId": "accept-edits"})
            assert changed.status_code == 200
            assert_documented("POST", "/session/{sessionId}/mode", changed)
            assert changed.json() == {"sessionId": session_id, "modeId": "accept-edits", "modelId": "m"}
            first = await events.next()
            assert (first.event, first.data) == ("mode_changed", {"sessionId": session_id, "modeId": "accept-edits"})
            model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)), Answer(text="done"))
            await served.prompt(session_id, "edit")
            seen = await until(events, "turn_complete")
        assert "permission_request" not in [e.event for e in seen]  # accept-edits: edits run at once
        assert app.read_text() == EDITED
        assert served.bridge.get(session_id).mode == "accept-edits"
        record = await served.bridge.store.get_session(session_id)
        assert record is not None and record.mode == "accept-edits"
        missing = await served.client.post("/session/nope/mode", json={"modeId": "default"})
        assert missing.status_code == 404
        assert_documented("POST", "/session/{sessionId}/mode", missing)
