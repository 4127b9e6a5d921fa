"""Tools end to end: the official ACP Python SDK as the editor (its ``Client`` with ``read_text_file``,
``write_text_file``, ``request_permission`` and the terminal methods) drives a real ``acp-server`` process over real
pipes against the scriptable loopback model; files, commands and terminals are real."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, spawn_agent_process
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeniedOutcome,
    FileEditToolCallContent,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TerminalToolCallContent,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.tools import READ_ONLY_TOOLS, sandbox_support
from tests.acp_blocks import text_block

pytestmark = pytest.mark.anyio


class _Terminal:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output = bytearray()
        self.released = False
        self.killed = False
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk


class Editor:
    """The client side, as an editor: answers permission requests from a script, serves ``fs/*`` from a buffer
    table (else the disk), runs terminals as real subprocesses; records everything and every update."""

    def __init__(self, answers: Sequence[str] = (), buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers)  # option ids, "cancelled", or "wait" (never answer)
        self.buffers = buffers or {}
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []
        self.asked = anyio.Event()
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.terminals: dict[str, _Terminal] = {}
        self.terminal_calls: list[str] = []
        self.created = anyio.Event()
        self.exit_awaited = anyio.Event()  # the agent has a terminal's id: it asked to wait for its exit

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options, len(self.updates)))
        self.asked.set()
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "wait":
            await anyio.sleep_forever()
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        text = self.buffers.get(path)
        if text is None:
            text = Path(path).read_text()  # noqa: ASYNC240 - the editor's own disk read, small
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        Path(path).write_text(content)  # noqa: ASYNC240 - the editor's own disk write, small
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self.terminal_calls.append("create")
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = _Terminal(process)
        self.created.set()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self.terminal_calls.append("wait_for_exit")
        self.exit_awaited.set()
        terminal = self.terminals[terminal_id]
        code = await terminal.process.wait()
        await terminal.reader
        if code < 0:
            return WaitForTerminalExitResponse(exit_code=None, signal="SIGKILL")
        return WaitForTerminalExitResponse(exit_code=code)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        self.terminal_calls.append("output")
        terminal = self.terminals[terminal_id]
        code = terminal.process.returncode
        status = None if code is None else TerminalExitStatus(exit_code=code)
        return TerminalOutputResponse(output=terminal.output.decode(), truncated=False, exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self.terminal_calls.append("kill")
        terminal = self.terminals[terminal_id]
        terminal.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal.process.pid, 9)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self.terminal_calls.append("release")
        terminal = self.terminals[terminal_id]
        terminal.released = True
        if terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(terminal.process.pid, 9)
            await terminal.process.wait()

    # -- reading what arrived ---------------------------------------------------------------------------------

    def calls(self, call_id: str) -> list[Any]:
        kinds = ToolCallStart | ToolCallProgress
        return [u for u in self.updates if isinstance(u, kinds) and u.tool_call_id == call_id]

    def final(self, call_id: str) -> Any:
        finals = [u for u in self.calls(call_id) if u.status in ("completed", "failed")]
        assert len(finals) == 1, self.calls(call_id)
        return finals[0]

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if isinstance(u, AgentMessageChunk))


def _capabilities(*, fs: bool = True, terminal: bool = True) -> ClientCapabilities:
    return ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
    )


@asynccontextmanager
async def _agent(
    editor: Editor, model: LoopbackModel, *flags: str, state: Path | None = None
) -> AsyncIterator[Any]:
    args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m"]
    args += ["--no-persist"] if state is None else ["--state-dir", str(state)]
    async with spawn_agent_process(editor, sys.executable, *args, *flags) as (conn, _process):
        yield conn


async def _session(conn: Any, cwd: Path, *, fs: bool = True, terminal: bool = True) -> str:
    await conn.initialize(protocol_version=1, client_capabilities=_capabilities(fs=fs, terminal=terminal))
    session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
    return str(session.session_id)


async def _eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Poll a condition about another process (a pid, a file it writes): bounded, never a fixed sleep."""
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def _exited(pid: int, timeout_s: float = 5.0) -> None:
    """Wait for a process that is not our child to end: its pidfd turns readable when it exits (an event)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(timeout_s):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _tool_messages(model: LoopbackModel, request: int) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in model.requests[request].messages if m.get("role") == "tool"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'on disk'\n")
    (tmp_path / "outside.txt").write_text("secret outside the project\n")
    return root


async def test_read_goes_through_the_editor_buffer_and_is_shown_as_a_tool_call(project: Path) -> None:
    app = str(project / "src" / "app.py")
    editor = Editor(buffers={app: "def main():\n    return 'UNSAVED BUFFER'\n"})
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "src/app.py"}, id="c1"),)), Answer(text="done"))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("look at app.py")])
    assert response.stop_reason == "end_turn"
    assert editor.reads == [app]
    start, *progress = editor.calls("c1")
    assert isinstance(start, ToolCallStart)
    assert (start.kind, start.status, start.title) == ("read", "pending", "Read")  # shown as its name streamed
    read = next(u for u in progress if u.title is not None)  # then what it is, once its arguments were read
    assert (read.kind, read.status, read.title) == ("read", None, "Read src/app.py")
    assert read.locations is not None and read.locations[0].path == app
    assert read.raw_input == {"path": "src/app.py"}
    assert [u.status for u in progress if u.status] == ["in_progress", "completed"]
    assert "UNSAVED BUFFER" in _tool_messages(model, 1)["c1"]  # the model saw the editor's buffer, not the disk
    assert set(model.requests[0].tool_names) >= set(READ_ONLY_TOOLS) - {"skill"}  # skill: only with skills
    assert editor.text().endswith("done")
    assert not editor.permission_requests  # reading never asks


async def test_read_without_the_fs_capability_reads_the_disk(project: Path) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "src/app.py"}, id="c1"),)), Answer(text="ok"))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project, fs=False)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("read it")])
    assert response.stop_reason == "end_turn"
    assert editor.reads == []  # not advertised: never called
    assert "on disk" in _tool_messages(model, 1)["c1"]


async def test_edits_ask_with_the_diff_and_honour_allow_and_reject(project: Path) -> None:
    app = project / "src" / "app.py"
    editor = Editor(answers=["allow_once", "reject_once"])
    edit = {"path": "src/app.py", "old_text": "'on disk'", "new_text": "'edited'"}
    again = {"path": "src/app.py", "old_text": "'edited'", "new_text": "'edited twice'"}
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("edit_file", edit, id="e1"),)),
            ToolCalls((ScriptedCall("edit_file", again, id="e2"),)),
            Answer(text="finished"),
        )
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("edit app.py")])
    assert response.stop_reason == "end_turn"
    assert app.read_text() == "def main():\n    return 'edited'\n"  # the first edit only
    assert editor.writes == [(str(app), "def main():\n    return 'edited'\n")]
    assert len(editor.permission_requests) == 2
    tool_call, options, seen = editor.permission_requests[0]
    assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once", "reject_always"}
    assert tool_call.tool_call_id == "e1" and tool_call.kind == "edit"
    diff = [c for c in tool_call.content or [] if isinstance(c, FileEditToolCallContent)]
    assert diff and diff[0].path == str(app)
    assert diff[0].old_text == "def main():\n    return 'on disk'\n"
    assert diff[0].new_text == "def main():\n    return 'edited'\n"
    # The permission request came after the announcement of its call, which the editor had already received.
    assert any(isinstance(u, ToolCallStart) and u.tool_call_id == "e1" for u in editor.updates[:seen])
    assert editor.final("e1").status == "completed"
    assert editor.final("e2").status == "failed"
    assert "declined" in _tool_messages(model, 2)["e2"]
    assert editor.text().endswith("finished")


async def test_allow_always_is_remembered_for_the_session(project: Path) -> None:
    editor = Editor(answers=["allow_always"])
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "a.txt", "content": "A\n"}, id="w1"),)),
            ToolCalls((ScriptedCall("write_file", {"path": "b.txt", "content": "B\n"}, id="w2"),)),
            Answer(text="ok"),
            ToolCalls((ScriptedCall("write_file", {"path": "c.txt", "content": "C\n"}, id="w3"),)),
            Answer(text="ok again"),
        )
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            await conn.prompt(session_id=session_id, prompt=[text_block("write two files")])
            await conn.prompt(session_id=session_id, prompt=[text_block("and a third")])
    assert len(editor.permission_requests) == 1
    assert [(project / n).read_text() for n in ("a.txt", "b.txt", "c.txt")] == ["A\n", "B\n", "C\n"]


async def test_command_runs_in_the_editor_terminal(project: Path) -> None:
    editor = Editor(answers=["allow_once"])
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("run_command", {"command": "echo hello-from-$((6*7)) && pwd"}, id="r1"),)),
            Answer(text="ran"),
        )
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("run it")])
    assert response.stop_reason == "end_turn"
    assert editor.terminal_calls[0] == "create" and editor.terminal_calls[-1] == "release"
    assert "wait_for_exit" in editor.terminal_calls and "output" in editor.terminal_calls
    shown = [
        c for u in editor.calls("r1") for c in (u.content or []) if isinstance(c, TerminalToolCallContent)
    ]
    assert shown and shown[0].terminal_id == "term-1"  # the editor shows its terminal inside the tool call
    assert editor.final("r1").status == "completed"
    output = _tool_messages(model, 1)["r1"]
    assert "hello-from-42" in output and str(project) in output


async def test_cancel_during_a_permission_wait_ends_the_prompt_and_the_call(project: Path) -> None:
    app = project / "src" / "app.py"
    before = app.read_text()
    editor = Editor(answers=["wait"])
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("write_file", {"path": "src/app.py", "content": "gone\n"}, id="w1"),))
        )
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            async with anyio.create_task_group() as tg:
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.prompt(session_id=session_id, prompt=[text_block("overwrite it")])
                    result["updates_at_answer"] = len(editor.updates)

                tg.start_soon(prompt)
                with anyio.fail_after(10):
                    await editor.asked.wait()
                await conn.cancel(session_id=session_id)
    assert result["r"].stop_reason == "cancelled"
    assert app.read_text() == before
    final = editor.final("w1")
    assert final.status == "failed"
    assert editor.updates.index(final) < result["updates_at_answer"]  # the call ended before the prompt answered
    assert len(model.requests) == 1


async def test_cancel_during_a_local_command_kills_its_process_group(project: Path) -> None:
    editor = Editor(answers=["allow_once"])
    pid_file = project / "pid"
    command = f"sh -c 'echo $$ > {pid_file}; exec sleep 1000' & wait"
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("run_command", {"command": command}, id="r1"),)))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project, terminal=False)
            async with anyio.create_task_group() as tg:
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.prompt(session_id=session_id, prompt=[text_block("sleep")])

                tg.start_soon(prompt)
                await _eventually(lambda: pid_file.exists() and bool(pid_file.read_text().strip()))
                pid = int(pid_file.read_text())
                os.kill(pid, 0)  # running: the grandchild of the agent's shell
                await conn.cancel(session_id=session_id)
            assert result["r"].stop_reason == "cancelled"
            await _exited(pid)
    assert editor.final("r1").status == "failed"
    assert editor.terminal_calls == []  # no terminal capability: run locally


async def test_max_turn_requests_stops_the_loop(project: Path) -> None:
    editor = Editor()
    read = ScriptedCall("read_file", {"path": "src/app.py"})
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((read,)), ToolCalls((read,)), ToolCalls((read,)))
        async with _agent(editor, model, "--max-turn-requests", "2") as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("loop")])
    assert response.stop_reason == "max_turn_requests"
    assert len(model.requests) == 2


async def test_paths_outside_the_project_are_refused_without_asking_the_editor(project: Path, tmp_path: Path) -> None:
    (project / "link").symlink_to(tmp_path / "outside.txt")
    (project / "linkdir").symlink_to(tmp_path)
    editor = Editor()
    calls = (
        ScriptedCall("read_file", {"path": "../outside.txt"}, id="x1"),
        ScriptedCall("read_file", {"path": "link"}, id="x2"),
        ScriptedCall("read_file", {"path": str(tmp_path / "outside.txt")}, id="x3"),
        ScriptedCall("read_file", {"path": "linkdir/outside.txt"}, id="x4"),
        ScriptedCall("write_file", {"path": "../planted.txt", "content": "x"}, id="x5"),
    )
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(calls), Answer(text="refused"))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("escape")])
    assert response.stop_reason == "end_turn"
    assert editor.reads == [] and editor.writes == [] and editor.permission_requests == []
    assert not (tmp_path / "planted.txt").exists()
    outputs = _tool_messages(model, 1)
    assert set(outputs) == {"x1", "x2", "x3", "x4", "x5"}
    for call_id, output in outputs.items():
        assert editor.final(call_id).status == "failed"
        assert "secret" not in output and "outside" in output.lower()


async def test_bad_calls_from_the_model_fail_precisely_and_the_loop_goes_on(project: Path) -> None:
    editor = Editor()
    calls = (
        ScriptedCall("read_file", '{"path": "src/app.py"', id="b1"),  # not JSON
        ScriptedCall("no_such_tool", {}, id="b2"),
        ScriptedCall("read_file", {"file": "src/app.py"}, id="b3"),  # fails the schema
    )
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(calls), Answer(text="recovered"))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            response = await conn.prompt(session_id=session_id, prompt=[text_block("go")])
    assert response.stop_reason == "end_turn"
    outputs = _tool_messages(model, 1)
    assert "JSON" in outputs["b1"]
    assert "no_such_tool" in outputs["b2"] and "read_file" in outputs["b2"]
    assert "path" in outputs["b3"]
    assert all(editor.final(c).status == "failed" for c in ("b1", "b2", "b3"))
    assert editor.text().endswith("recovered")


async def test_load_replays_tool_calls_in_order(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = Editor()
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((ScriptedCall("read_file", {"path": "src/app.py"}, id="c1"),), text="Let me look."),
            Answer(text="It returns a string.", reasoning=""),
        )
        async with _agent(first, model, state=state) as conn:
            session_id = await _session(conn, project)
            await conn.prompt(session_id=session_id, prompt=[text_block("what does app.py return?")])
        second = Editor()
        async with _agent(second, model, state=state) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            loaded = await conn.load_session(session_id=session_id, cwd=str(project), mcp_servers=[])
    assert loaded.modes is not None and loaded.modes.current_mode_id == "default"
    # The commands update follows the load's answer: whether the SDK delivered it yet is not this test's concern.
    kinds = [type(u).__name__ for u in second.updates if type(u).__name__ != "AvailableCommandsUpdate"]
    assert kinds == [
        "UserMessageChunk",
        "AgentMessageChunk",
        "ToolCallStart",
        "ToolCallProgress",
        "AgentMessageChunk",
        "SessionInfoUpdate",  # the session's title ends the replay
    ]
    start, end = second.updates[2], second.updates[3]
    assert (start.tool_call_id, start.kind, start.title) == ("c1", "read", "Read src/app.py")
    assert (end.tool_call_id, end.status) == ("c1", "completed")
    assert isinstance(second.updates[0], UserMessageChunk)
    assert second.updates[1].content.text == "Let me look."
    assert second.updates[4].content.text == "It returns a string."


async def test_modes_both_ways_and_read_only_offers_only_reading(project: Path) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="a"), Answer(text="b"))
        async with _agent(editor, model) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert session.modes is not None and session.modes.current_mode_id == "default"
            ids = [m.id for m in session.modes.available_modes]
            # bypass only when the server allows it; sandbox where the sandbox works here
            sandbox = ["sandbox"] if sandbox_support().mechanism else []
            assert ids == ["default", "accept-edits", "read-only", *sandbox]
            assert session.config_options is not None
            option = session.config_options[0]
            assert option.category == "mode" and option.current_value == "default"
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
            await conn.set_session_mode(session_id=session.session_id, mode_id="read-only")
            assert any(isinstance(u, CurrentModeUpdate) and u.current_mode_id == "read-only" for u in editor.updates)
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hi again")])
            with pytest.raises(RequestError) as refused:
                await conn.set_session_mode(session_id=session.session_id, mode_id="bypass-permissions")
            assert refused.value.code == -32602
            answer = await conn.set_config_option(config_id="mode", session_id=session.session_id, value="accept-edits")
            assert answer.config_options[0].current_value == "accept-edits"
    assert "write_file" in model.requests[0].tool_names
    assert sorted(model.requests[1].tool_names) == sorted(READ_ONLY_TOOLS - {"skill"})  # skill: only with skills


async def test_a_session_keeps_the_mode_it_started_in_under_a_server_with_another_default(
    project: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    app = project / "src" / "app.py"
    edit = {"path": "src/app.py", "old_text": "'on disk'", "new_text": "'edited'"}
    bypass = ("--default-mode", "bypass-permissions", "--allow-bypass-permissions")
    async with LoopbackModel() as model:
        async with _agent(Editor(), model, state=state) as conn:  # the default mode, never switched
            session_id = await _session(conn, project)
        model.enqueue(ToolCalls((ScriptedCall("edit_file", edit, id="e1"),)), Answer(text="asked"))
        editor = Editor(["reject_once"])
        async with _agent(editor, model, *bypass, state=state) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            loaded = await conn.load_session(session_id=session_id, cwd=str(project), mcp_servers=[])
            assert loaded.modes is not None and loaded.modes.current_mode_id == "default"
            assert loaded.config_options is not None and loaded.config_options[0].current_value == "default"
            response = await conn.prompt(session_id=session_id, prompt=[text_block("edit it")])
            fresh = await conn.new_session(cwd=str(project), mcp_servers=[])
    assert response.stop_reason == "end_turn"
    assert len(editor.permission_requests) == 1  # default asks before an edit: bypass was never applied
    assert editor.final("e1").status == "failed" and "on disk" in app.read_text()
    assert fresh.modes is not None and fresh.modes.current_mode_id == "bypass-permissions"  # that server's default


async def test_kill_9_mid_tool_loses_at_most_the_running_call(project: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    pid_file = project / "pid"
    calls = (
        ScriptedCall("read_file", {"path": "src/app.py"}, id="done1"),
        ScriptedCall("run_command", {"command": f"echo $$ > {pid_file}; exec sleep 1000"}, id="lost2"),
    )
    flags = ("--allow-bypass-permissions", "--default-mode", "bypass-permissions")
    editor = Editor()
    pid = 0
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(calls))
        args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--state-dir", str(state), *flags]
        try:
            async with spawn_agent_process(editor, sys.executable, *args) as (conn, process):
                session_id = await _session(conn, project, terminal=False)
                async with anyio.create_task_group() as tg:

                    async def prompt() -> None:
                        with contextlib.suppress(Exception):
                            await conn.prompt(session_id=session_id, prompt=[text_block("read, then sleep")])

                    tg.start_soon(prompt)
                    await _eventually(lambda: pid_file.exists() and bool(pid_file.read_text().strip()))
                    pid = int(pid_file.read_text())
                    process.kill()  # SIGKILL, mid-command
                    await process.wait()
                    tg.cancel_scope.cancel()
        finally:
            if pid and _alive(pid):
                os.kill(pid, 9)  # the agent died without reaping it: the test cleans up its own mess
        model.enqueue(Answer(text="after the crash", reasoning=""))
        second = Editor()
        async with _agent(second, model, *flags, state=state) as conn:
            await conn.initialize(protocol_version=1, client_capabilities=_capabilities())
            await conn.load_session(session_id=session_id, cwd=str(project), mcp_servers=[])
            replayed = list(second.updates)
            await conn.prompt(session_id=session_id, prompt=[text_block("go on")])
    ids = [u.tool_call_id for u in replayed if isinstance(u, ToolCallStart)]
    assert ids == ["done1"]  # the finished call was stored; the one running at the kill is lost
    assert [u.status for u in replayed if isinstance(u, ToolCallProgress)] == ["completed"]
    history = model.requests[-1].messages
    assistant = [m for m in history if m.get("tool_calls")]
    assert [c["id"] for c in assistant[0]["tool_calls"]] == ["done1"]  # the model's history stays well formed
    assert [m["tool_call_id"] for m in history if m.get("role") == "tool"] == ["done1"]


async def test_cancel_during_an_editor_terminal_kills_and_releases_it(project: Path) -> None:
    editor = Editor(answers=["allow_once"])
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("run_command", {"command": "sleep 1000"}, id="t1"),)))
        async with _agent(editor, model) as conn:
            session_id = await _session(conn, project)
            async with anyio.create_task_group() as tg:
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.prompt(session_id=session_id, prompt=[text_block("sleep")])

                tg.start_soon(prompt)
                with anyio.fail_after(10):  # the create's answer reached the agent (the 1.0 SDK may send a
                    await editor.exit_awaited.wait()  # cancel before it, and the agent never learns the id)
                await conn.cancel(session_id=session_id)
    assert result["r"].stop_reason == "cancelled"
    assert editor.terminal_calls[0] == "create"
    assert "kill" in editor.terminal_calls and editor.terminal_calls[-1] == "release"
    terminal = editor.terminals["term-1"]
    assert terminal.killed and terminal.released and terminal.process.returncode is not None
    assert editor.final("t1").status == "failed"


async def test_an_editor_answer_too_large_to_read_fails_the_call_instead_of_hanging(project: Path) -> None:
    app = str(project / "src" / "app.py")
    editor = Editor(buffers={app: ("x" * 99 + "\n") * 4_000})  # 400 KB of unsaved buffer for a tiny file on disk
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((ScriptedCall("read_file", {"path": "src/app.py"}, id="big"),)), Answer(text="ok"))
        async with _agent(editor, model, "--max-message-bytes", "100000") as conn:
            session_id = await _session(conn, project)
            with anyio.fail_after(20):
                response = await conn.prompt(session_id=session_id, prompt=[text_block("read it")])
    assert response.stop_reason == "end_turn"
    assert editor.final("big").status == "failed"
    assert "exceeds the 100000-byte limit" in _tool_messages(model, 1)["big"]
