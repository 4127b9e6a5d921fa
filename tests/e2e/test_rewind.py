"""Checkpoints and ``/rewind`` end to end: the official ACP SDK as the editor drives a real ``acp-server`` process
(SQLite state directory, bypass-permissions) against the scriptable loopback model; files and commands are real."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    WriteTextFileResponse,
)

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_blocks import text_block

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Editor:
    """An editor with neither fs nor terminal: the tools write and run locally."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    def said(self, since: int = 0) -> str:
        return "".join(u.content.text for u in self.updates[since:] if isinstance(u, AgentMessageChunk))


class FsEditor(Editor):
    """An editor that reads and writes files for the agent (its buffers are the disk here), recording writes."""

    fs = True

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str]] = []

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=Path(path).read_text())  # noqa: ASYNC240 - the editor's small read

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        Path(path).write_text(content)  # noqa: ASYNC240 - the editor's own small write
        return WriteTextFileResponse()


@asynccontextmanager
async def _agent(editor: Editor, model: LoopbackModel, state: Path) -> AsyncIterator[tuple[Any, Any]]:
    args = ["-m", "acp_server", "--base-url", model.base_url, "--model", "m", "--state-dir", str(state)]
    args += ["--allow-bypass-permissions", "--default-mode", "bypass-permissions"]
    async with spawn_agent_process(editor, sys.executable, *args) as (conn, process):
        on = isinstance(editor, FsEditor)
        fs = FileSystemCapabilities(read_text_file=on, write_text_file=on)
        caps = ClientCapabilities(fs=fs, terminal=False)
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        yield conn, process


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path → SHA-256 of its bytes)."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


async def _say(conn: Any, editor: Editor, session_id: str, text: str) -> str:
    since = len(editor.updates)
    await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    return editor.said(since)


def _write(path: str, content: str, call: str) -> ToolCalls:
    return ToolCalls((ScriptedCall("write_file", {"path": path, "content": content}, id=call),))


def _run(command: str, call: str) -> ToolCalls:
    return ToolCalls((ScriptedCall("run_command", {"command": command}, id=call),))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "notes.txt").write_text("B line\n")
    (root / "keep.txt").write_text("keep me\n")
    (root / ".gitignore").write_text("build/\n")
    return root


async def test_rewind_2_puts_the_tree_back_and_the_model_sees_only_the_first_turn(
    project: Path, tmp_path: Path
) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(
            _write("src/app.py", "def main():\n    return 2\n", "w1"),
            Answer(text="one"),
            _write("src/new.py", "created\n", "w2"),
            _run("sed -i 's/B/B2/' notes.txt && rm keep.txt && mkdir -p build && echo x > build/out", "r2"),
            Answer(text="two"),
            _write("src/app.py", "def main():\n    return 3\n", "w3"),
            _run("rm src/new.py && echo made > made.txt", "r3"),
            Answer(text="three"),
            Answer(text="after the rewind"),
        )
        async with _agent(editor, model, tmp_path / "state") as (conn, _):
            session_id = str((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            await _say(conn, editor, session_id, "first prompt")
            after_first = tree(project)
            await _say(conn, editor, session_id, "second prompt")
            await _say(conn, editor, session_id, "third prompt")
            assert (project / "made.txt").exists() and not (project / "keep.txt").exists()
            listing = await _say(conn, editor, session_id, "/rewind")
            assert "1. first prompt — 1 file changed: src/app.py" in listing
            assert "2. second prompt — 3 files changed" in listing and "build" not in listing  # ignored: not tracked
            assert "3. third prompt — 3 files changed" in listing
            answer = await _say(conn, editor, session_id, "/rewind 2")
            # app.py, notes.txt and keep.txt restored, made.txt removed; src/new.py (made, then removed) is as it was
            assert answer.startswith("Rewound: 4 files put back as before prompt 2 (1 removed)"), answer
            expected = {k: v for k, v in after_first.items()} | {"build/out": tree(project)["build/out"]}
            assert tree(project) == expected  # the ignored build output is not the checkpoints' to undo
            requests = len(model.requests)
            assert "after the rewind" in await _say(conn, editor, session_id, "fourth prompt")
            users = [m["content"] for m in model.requests[requests].messages if m["role"] == "user"]
            assert len(users) == 2 and "first prompt" in str(users[0]) and "fourth prompt" in str(users[1])
            assert "2. fourth prompt" in await _say(conn, editor, session_id, "/rewind")
        editor2 = Editor()
        async with _agent(editor2, model, tmp_path / "state") as (conn, _):
            await conn.load_session(session_id=session_id, cwd=str(project), mcp_servers=[])
            notes = [u for u in editor2.updates if isinstance(u, AgentMessageChunk) and "Rewound:" in u.content.text]
            assert len(notes) == 1 and "messages 3–6" in notes[0].content.text


async def test_a_file_changed_since_stops_the_rewind_unless_forced(project: Path, tmp_path: Path) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(_write("src/app.py", "agent\n", "w1"), _write("other.txt", "agent\n", "w2"), Answer(text="ok"))
        async with _agent(editor, model, tmp_path / "state") as (conn, _):
            session_id = str((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            help_text = await _say(conn, editor, session_id, "/help")
            assert "- /rewind <prompt number, --files-only, --conversation-only, --force" in help_text
            await _say(conn, editor, session_id, "edit")
            (project / "src" / "app.py").write_text("the user's own change\n")
            answer = await _say(conn, editor, session_id, "/rewind 1")
            assert answer.startswith("Rewind stopped: 1 file changed") and "- src/app.py" in answer
            assert (project / "other.txt").exists()  # nothing restored
            assert (project / "src" / "app.py").read_text() == "the user's own change\n"
            assert "Rewound" in await _say(conn, editor, session_id, "/rewind 1 --force")
            assert (project / "src" / "app.py").read_text() == "def main():\n    return 1\n"
            assert not (project / "other.txt").exists()
            checkpoints = tmp_path / "state" / "checkpoints" / session_id
            assert checkpoints.is_dir() and not list(project.rglob("*.json"))  # noqa: ASYNC240 - never in the project
            await conn._conn.send_request("session/delete", {"sessionId": session_id})  # the SDK has no method yet
            assert not checkpoints.exists()  # removed with the session


async def _eventually(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll a condition about another process's work (its files): bounded, never a fixed sleep."""
    for _ in range(int(timeout_s / 0.002)):
        if condition():
            return
        await anyio.sleep(0.002)
    raise AssertionError("condition not met in time")


def _restored(files: Path, before: dict[str, str]) -> int:
    """How many of the files are back as they were (a sample of them: a cheap probe)."""
    now = tree(files)
    return sum(now.get(f"f{i:03}.txt") == before[f"many/f{i:03}.txt"] for i in range(0, 200, 5))


async def test_a_rewind_killed_midway_then_run_again_yields_the_right_tree(project: Path, tmp_path: Path) -> None:
    files = project / "many"
    files.mkdir()
    for i in range(200):
        (files / f"f{i:03}.txt").write_bytes(f"old {i}\n".encode() * 20_000)
    before = tree(project)
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(_run("for f in many/*.txt; do echo changed >> $f; done", "r1"), Answer(text="done"))
        async with _agent(editor, model, tmp_path / "state") as (conn, process):
            session_id = str((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            await _say(conn, editor, session_id, "change them all")
            changed = tree(project)
            assert all(changed[k] != before[k] for k in before if k.startswith("many/"))
            async with anyio.create_task_group() as tg:
                tg.start_soon(_say, conn, editor, session_id, "/rewind 1")
                await _eventually(lambda: _restored(files, before) > 0)
                os.kill(process.pid, signal.SIGKILL)
                tg.cancel_scope.cancel()
        now = tree(project)
        assert all(now[k] in (before[k], changed[k]) for k in before)  # each file whole: before or after
        editor2 = Editor()
        async with _agent(editor2, model, tmp_path / "state") as (conn, _):
            await conn.load_session(session_id=session_id, cwd=str(project), mcp_servers=[])
            answer = await _say(conn, editor2, session_id, "/rewind 1")
            assert answer.startswith("Rewound:"), answer
    assert tree(project) == before


async def test_the_extension_method_lists_previews_with_diffs_then_rewinds(project: Path, tmp_path: Path) -> None:
    editor = Editor()
    async with LoopbackModel() as model:
        model.enqueue(Answer(text="no"), _write("src/app.py", "def main():\n    return 2\n", "w1"), Answer(text="ok"))
        async with _agent(editor, model, tmp_path / "state") as (conn, _):
            session_id = str((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            await _say(conn, editor, session_id, "just talk")
            await _say(conn, editor, session_id, "edit app")
            method = "acp-server/rewind"  # the SDK sends it as _acp-server/rewind
            listed = await conn.ext_method(method, {"sessionId": session_id})
            assert listed["prompts"] == [
                {"number": 1, "firstLine": "just talk", "files": []},
                {"number": 2, "firstLine": "edit app", "files": ["src/app.py"]},
            ]
            shown = await conn.ext_method(method, {"sessionId": session_id, "prompt": 2, "preview": True})
            assert shown["conflicts"] == [] and [f["action"] for f in shown["files"]] == ["restore"]
            assert "-    return 2\n+    return 1\n" in shown["files"][0]["diff"]
            assert (project / "src" / "app.py").read_text() == "def main():\n    return 2\n"  # a preview writes nothing
            done = await conn.ext_method(method, {"sessionId": session_id, "prompt": 2, "filesOnly": True})
            assert done == {
                "prompt": 2,
                "restored": ["src/app.py"],
                "removed": [],
                "failed": [],
                "conversationRewound": False,
            }
            assert (project / "src" / "app.py").read_text() == "def main():\n    return 1\n"
            listed = await conn.ext_method(method, {"sessionId": session_id})
            assert len(listed["prompts"]) == 2  # files only: the conversation is whole


async def test_a_session_writing_through_the_editor_is_rewound_through_it(project: Path, tmp_path: Path) -> None:
    editor = FsEditor()
    async with LoopbackModel() as model:
        model.enqueue(_write("src/app.py", "edited\n", "w1"), _write("added.txt", "new\n", "w2"), Answer(text="ok"))
        async with _agent(editor, model, tmp_path / "state") as (conn, _):
            session_id = str((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            await _say(conn, editor, session_id, "edit")
            assert len(editor.writes) == 2
            assert (await _say(conn, editor, session_id, "/rewind 1")).startswith("Rewound: 2 files")
    app = str(project / "src" / "app.py")
    assert editor.writes[2:] == [(app, "def main():\n    return 1\n")]  # the open buffer follows; a removal is local
    assert not (project / "added.txt").exists()
