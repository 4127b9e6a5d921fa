"""An editor that does not answer, end to end: the official ACP Python SDK as the editor, a real ``acp-server``
process over real pipes. A ``terminal/create`` or an ``fs/read_text_file`` left unanswered ends the call ``failed``
within its bound and the prompt goes on; the answer the editor sends afterwards changes nothing (no crash, no second
update), except that a terminal created too late is released at once (its command must not run on unwatched). A
switch to ``read-only`` while a permission request is pending withdraws it: the call ends ``failed`` and the late
"allow" writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import CreateTerminalResponse, ReadTextFileResponse, RequestPermissionResponse

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

from .test_tools import Editor, _agent, _session, _tool_messages

pytestmark = pytest.mark.anyio

GUARD_S = 30  # a regression fails here instead of hanging (each bound below is at most a few seconds)


class LateEditor(Editor):
    """An editor that answers ``terminal/create``, ``fs/read_text_file`` and ``session/request_permission`` only
    once the test sets ``answer`` (after the agent stopped waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = anyio.Event()
        self.unanswered = 0
        self.all_answered = anyio.Event()
        self.released: list[str] = []
        self.release_seen = anyio.Event()

    async def _late(self) -> None:
        self.unanswered += 1
        await self.answer.wait()
        self.unanswered -= 1
        if not self.unanswered:
            self.all_answered.set()

    async def create_terminal(self, session_id: str, command: str, **kwargs: Any) -> CreateTerminalResponse:
        self.terminal_calls.append("create")
        await self._late()
        return CreateTerminalResponse(terminal_id="late-terminal")

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self.terminal_calls.append("release")
        self.released.append(terminal_id)
        self.release_seen.set()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        await self._late()
        return ReadTextFileResponse(content="late text\n")

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options, len(self.updates)))
        self.asked.set()
        await self._late()
        return await super().request_permission(session_id, tool_call, options, **kwargs)


async def _answered_late(editor: LateEditor) -> None:
    """Let the editor send its late answers, and wait until it has."""
    assert editor.unanswered == 1
    editor.answer.set()
    with anyio.fail_after(GUARD_S):
        await editor.all_answered.wait()


async def test_an_unanswered_terminal_create_fails_the_call_within_its_timeout_and_the_late_terminal_is_released(
    tmp_path: Path,
) -> None:
    editor = LateEditor()
    run = ScriptedCall("run_command", {"command": "echo hi", "timeout_ms": 1500}, id="x1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((run,)), Answer(text="first done"), Answer(text="second done"))
        async with _agent(editor, model, "--default-mode", "bypass-permissions", "--allow-bypass-permissions") as conn:
            session_id = await _session(conn, tmp_path)
            with anyio.fail_after(GUARD_S):
                first = await conn.prompt(session_id=session_id, prompt=[text_block("run it")])
            assert first.stop_reason == "end_turn"
            assert editor.final("x1").status == "failed"
            told = _tool_messages(model, 1)["x1"]
            assert "did not answer terminal/create within the command's timeout (1500 ms)" in told
            await _answered_late(editor)
            with anyio.fail_after(GUARD_S):
                await editor.release_seen.wait()  # the late terminal is released: its command stops
            with anyio.fail_after(GUARD_S):  # the agent is alive and well after the late answer
                second = await conn.prompt(session_id=session_id, prompt=[text_block("again")])
    assert second.stop_reason == "end_turn"
    assert editor.text().endswith("second done")
    assert len([u for u in editor.calls("x1") if u.status in ("completed", "failed")]) == 1  # no second update
    assert editor.terminal_calls == ["create", "release"]  # released, and nothing else asked of it
    assert editor.released == ["late-terminal"]


async def test_an_unanswered_file_read_fails_the_call_after_the_fs_bound_and_a_late_answer_is_ignored(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("on disk\n")
    editor = LateEditor()
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("read_file", {"path": "a.txt"}, id="r1"),)), Answer(text="ok"), Answer(text="ok 2")
        )
        async with _agent(editor, model, "--fs-request-timeout-ms", "400") as conn:
            session_id = await _session(conn, tmp_path)
            with anyio.fail_after(GUARD_S):
                first = await conn.prompt(session_id=session_id, prompt=[text_block("read it")])
            assert first.stop_reason == "end_turn"
            assert editor.final("r1").status == "failed"
            assert "fs/read_text_file failed: the editor did not answer within 400 ms" in _tool_messages(model, 1)["r1"]
            await _answered_late(editor)
            with anyio.fail_after(GUARD_S):
                second = await conn.prompt(session_id=session_id, prompt=[text_block("again")])
    assert second.stop_reason == "end_turn"
    assert len([u for u in editor.calls("r1") if u.status in ("completed", "failed")]) == 1


async def test_a_switch_to_read_only_withdraws_a_pending_request_and_the_late_allow_writes_nothing(
    tmp_path: Path,
) -> None:
    editor = LateEditor()
    editor.answers = ["allow_once"]
    write = ScriptedCall("write_file", {"path": "a.txt", "content": "A\n"}, id="w1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((write,)), Answer(text="done"))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, tmp_path, fs=False)
            async with anyio.create_task_group() as tg:
                replies: list[Any] = []

                async def prompt() -> None:
                    replies.append(await conn.prompt(session_id=session_id, prompt=[text_block("write a")]))

                tg.start_soon(prompt)
                with anyio.fail_after(GUARD_S):
                    await editor.asked.wait()
                    await conn.set_session_mode(session_id=session_id, mode_id="read-only")
            assert replies[0].stop_reason == "end_turn"  # the prompt ended without the user's answer
            assert editor.final("w1").status == "failed"
            assert "switched to the 'read-only' mode" in _tool_messages(model, 1)["w1"]
            await _answered_late(editor)  # the user clicks "Allow" on the stale dialog
            with anyio.fail_after(GUARD_S):  # the agent is alive: a round trip after the late answer
                await conn.set_session_mode(session_id=session_id, mode_id="default")
    assert not (tmp_path / "a.txt").exists()
    assert len([u for u in editor.calls("w1") if u.status in ("completed", "failed")]) == 1
