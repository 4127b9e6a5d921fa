"""The SDK and tools: typed ``tool_call`` / ``permission_request`` / ``mode_changed`` events, ``on_permission`` end to
end (and the rejection without it), ``answer_permission``, modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from acp_server.client import (
    DaemonClient,
    DaemonEvent,
    DaemonInvalidRequestError,
    DaemonPermissionRequestNotFoundError,
    DaemonSessionClient,
    EventStream,
    ModeChangedEvent,
    PermissionOption,
    PermissionRequestEvent,
    SessionUpdateEvent,
    ToolCallEvent,
    TurnCompleteEvent,
)
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import running_daemon, wait_pending

pytestmark = pytest.mark.anyio

TOKEN = "sdk-token"
ORIGINAL = "x = 1\n"
EDIT = {"path": "app.py", "old_text": "x = 1", "new_text": "x = 2"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(ORIGINAL)
    return tmp_path


async def next_permission_request(events: EventStream) -> PermissionRequestEvent:
    with anyio.fail_after(5):
        async for event in events:
            if isinstance(event, PermissionRequestEvent):
                return event
    raise AssertionError("the stream ended without a permission request")


def tool_messages(model: LoopbackModel, request: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.requests[request].messages if m.get("role") == "tool"}


async def test_on_permission_answers_and_on_update_sees_the_tool_calls(project: Path) -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
    ):
        model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)), Answer(text="edited"))
        asked: list[PermissionRequestEvent] = []
        updates: list[SessionUpdateEvent] = []

        async def decide(request: PermissionRequestEvent) -> str:
            asked.append(request)
            assert (project / "app.py").read_text() == ORIGINAL  # nothing runs before the answer
            await anyio.lowlevel.checkpoint()
            option = request.option_id("allow_once")
            assert option is not None
            return option

        session = await DaemonSessionClient.create_or_attach(client, project, mode_id="default")
        async with session:
            result = await session.prompt("edit app.py", on_update=updates.append, on_permission=decide)
            assert session.pending_prompts == 0
        assert result.stop_reason == "end_turn"
        assert (project / "app.py").read_text() == "x = 2\n"
        (request,) = asked
        assert (request.session_id, request.prompt_id) == (session.session_id, result.prompt_id)
        assert request.title and request.tool_call["toolCallId"] == "e1" and request.tool_call["kind"] == "edit"
        assert request.tool_call["content"][0]["type"] == "diff"
        assert request.options[0] == PermissionOption("allow_once", "Allow", "allow_once")
        assert [o.kind for o in request.options] == ["allow_once", "allow_always", "reject_once", "reject_always"]
        calls = [u for u in updates if isinstance(u, ToolCallEvent)]
        assert [(c.tool_call_id, c.kind, c.status) for c in calls if c.status is not None] == [
            ("e1", "tool_call", "pending"),
            ("e1", "tool_call_update", "in_progress"),
            ("e1", "tool_call_update", "completed"),
        ]  # besides the updates while the call streamed and once it was read (no status: it did not change)
        assert calls[0].event == "tool_call" and calls[0].title
        assert any(c.title == "Edit app.py" for c in calls if c.kind == "tool_call_update")
        assert "".join(u.text or "" for u in updates if u.kind == "agent_message_chunk") == "edited"


@pytest.mark.parametrize("through", ["session", "client"])
async def test_without_on_permission_every_request_is_rejected(project: Path, through: str) -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
    ):
        model.enqueue(
            ToolCalls((ScriptedCall("run_command", {"command": "touch ran.txt"}, id="c1"),)), Answer(text="ok")
        )
        session_id = await client.create_session(project)
        if through == "session":
            async with DaemonSessionClient(client, session_id) as session:
                result = await session.prompt("run it")
        else:
            result = await client.prompt(session_id, "run it")
        assert result.stop_reason == "end_turn"
        assert not (project / "ran.txt").exists()
        assert "declined" in tool_messages(model, 1)["c1"]


async def test_a_failing_on_permission_abandons_and_cancels_the_prompt(project: Path) -> None:
    class Undecided(Exception):
        pass

    async with (
        LoopbackModel() as model,
        running_daemon(model, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
    ):
        model.enqueue(ToolCalls((ScriptedCall("edit_file", EDIT, id="e1"),)))
        session_id = await client.create_session(project)

        def refuse_to_decide(request: PermissionRequestEvent) -> str:
            raise Undecided(request.request_id)

        async with client.events(session_id) as events:
            with pytest.raises(Undecided):
                await client.prompt(session_id, "edit", on_permission=refuse_to_decide)
            assert client.pending_prompts(session_id) == 0
            with anyio.fail_after(5):
                seen: list[DaemonEvent] = []
                async for event in events:
                    seen.append(event)
                    if isinstance(event, TurnCompleteEvent):
                        break
        assert isinstance(seen[-1], TurnCompleteEvent) and seen[-1].stop_reason == "cancelled"
        await wait_pending(lambda: served.pending(session_id), 0)
        assert (project / "app.py").read_text() == ORIGINAL


async def test_events_answer_permission_and_modes_through_the_client(project: Path) -> None:
    async with (
        LoopbackModel() as model,
        running_daemon(model, token=TOKEN) as served,
        DaemonClient(served.url, token=TOKEN) as client,
    ):
        capabilities = await client.capabilities()
        assert [m.id for m in capabilities.modes] == ["default", "accept-edits", "read-only"]
        assert capabilities.default_mode_id == "default"
        read_only = ("read_file", "list_directory", "glob", "grep", "task", "skill", "update_plan")
        assert capabilities.modes[2].tools == read_only
        assert "run_command" in capabilities.tools and capabilities.supports("session.permission")
        with pytest.raises(DaemonInvalidRequestError) as refused:
            await client.create_session(project, mode_id="bypass-permissions")
        assert refused.value.details[0]["field"] == "modeId"

        session_id = await client.create_session(project, mode_id="read-only")
        model.enqueue(ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A"}, id="w1"),)))
        model.enqueue(Answer(text="written"))
        async with client.events(session_id) as events:
            assert await client.set_mode(session_id, "default") == "default"
            changed = await events.__anext__()
            assert isinstance(changed, ModeChangedEvent) and changed.mode_id == "default"
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def send() -> None:
                    results.append(await client.prompt(session_id, "write", wait=True))

                tg.start_soon(send)
                event = await next_permission_request(events)
                assert event.tool_call["toolCallId"] == "w1"
                with pytest.raises(DaemonInvalidRequestError):
                    await client.answer_permission(session_id, event.request_id, "perhaps")
                await client.answer_permission(session_id, event.request_id, "allow_once")
                with pytest.raises(DaemonPermissionRequestNotFoundError) as gone:
                    await client.answer_permission(session_id, event.request_id, "allow_once")
                assert (gone.value.session_id, gone.value.request_id) == (session_id, event.request_id)
        assert results[0].stop_reason == "end_turn"
        assert (project / "a.txt").read_text() == "A"
        with pytest.raises(ValueError, match="on_permission"):
            await client.prompt(session_id, "x", wait=True, on_permission=lambda r: "allow_once")
        with pytest.raises(ValueError, match="set_mode"):
            await DaemonSessionClient.create_or_attach(client, project, session_id=session_id, mode_id="default")


async def test_a_tokenless_daemon_reports_read_only_to_the_sdk(project: Path) -> None:
    async with running_daemon(None) as served, DaemonClient(served.url) as client:
        capabilities = await client.capabilities()
        assert [m.id for m in capabilities.modes] == ["read-only"]
        assert capabilities.tools == ("read_file", "list_directory", "glob", "grep", "task", "skill", "update_plan")
        session_id = await client.create_session(project)
        with pytest.raises(DaemonInvalidRequestError):
            await client.set_mode(session_id, "default")
