"""``acp-server ask`` as a new user meets it: quiet, the answer alone on stdout, nothing stored unless asked, and
the bare agent on a terminal says what it is."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

import anyio
import pytest

from acp_server.provider.offline import Answer, ConnectionReset, LoopbackModel

from ._agent import COMMAND, spawn_agent

pytestmark = pytest.mark.anyio


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ACP_SERVER_"))}
    env.update(extra)
    return env


def _ask(*args: str, cwd: Path | None = None, merged: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, "ask", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        env=_env(**env),
        cwd=cwd,
        timeout=60,
    )


def test_ask_prints_only_the_answer_and_a_newline_and_logs_nothing_at_info() -> None:
    result = _ask("--offline", "what is up")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "You said: what is up\n"
    assert " INFO " not in result.stderr  # ask logs at WARNING unless asked
    assert "Reading the prompt" in result.stderr  # the reasoning still goes to stderr


def test_ask_with_info_logs_ends_the_answer_before_the_next_log_line() -> None:
    # stdout and stderr into one pipe, as on a terminal: the agent's closing log line must start on its own line.
    result = _ask("--offline", "--log-level", "INFO", "what is up", merged=True)
    assert result.returncode == 0, result.stdout
    assert " INFO " in result.stdout
    assert "You said: what is up\n" in result.stdout


def test_a_failed_ask_writes_nothing_to_stdout() -> None:
    result = _ask("hello")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().startswith("acp-server ask: Authentication required: no model endpoint")


async def _sessions_of(cwd: Path, state: Path) -> list[str]:
    async with spawn_agent(env={"XDG_STATE_HOME": str(state)}) as agent:
        await agent.initialize()
        reply = await agent.request("session/list", {"cwd": str(cwd)})
    return [s["sessionId"] for s in reply["result"]["sessions"]]


async def test_ask_stores_no_session_unless_persist(tmp_path: Path) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    result = await anyio.to_thread.run_sync(
        lambda: _ask("--offline", "forget me", cwd=project, XDG_STATE_HOME=str(state))
    )
    assert result.returncode == 0, result.stderr
    assert await _sessions_of(project, state) == []
    kept = await anyio.to_thread.run_sync(
        lambda: _ask("--offline", "--persist", "keep me", cwd=project, XDG_STATE_HOME=str(state))
    )
    assert kept.returncode == 0, kept.stderr
    assert len(await _sessions_of(project, state)) == 1


def test_persist_and_no_persist_together_are_a_usage_error() -> None:
    result = _ask("--offline", "--persist", "--no-persist", "x")
    assert result.returncode == 2 and "--persist" in result.stderr and result.stdout == ""


def test_bare_agent_on_a_terminal_says_what_it_is_and_keeps_serving() -> None:
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            COMMAND, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), close_fds=True
        )
        os.close(follower)
        follower = -1
        os.write(leader, b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n')
        assert process.stdout is not None
        reply = process.stdout.readline()  # the agent kept serving: it answers what arrives on the terminal
        os.write(leader, b"\x04")  # Ctrl-D: EOF on the terminal
        _, stderr = process.communicate(timeout=30)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert b'"protocolVersion":1' in reply.replace(b" ", b"")
    assert process.returncode == 0
    text = stderr.decode()
    assert "this is an Agent Client Protocol agent" in text and 'acp-server ask --offline "hello"' in text


def test_bare_agent_on_a_pipe_prints_no_hint() -> None:
    result = subprocess.run(COMMAND, input=b"", capture_output=True, env=_env(), timeout=30)
    assert result.returncode == 0
    assert b"Agent Client Protocol agent" not in result.stderr


def test_ask_offline_reads_a_named_file_with_the_read_file_tool(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Field notes\nline two\nline three\n")
    result = _ask("--offline", "what is in notes.md?", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "→ Read notes.md" in result.stderr  # each tool call is shown on stderr
    assert "3 lines" in result.stdout and "# Field notes" in result.stdout


async def test_ask_in_default_mode_declines_an_edit_when_stdin_is_not_a_terminal(tmp_path: Path) -> None:
    from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

    write = ScriptedCall("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls((write,)), Answer(text="I could not write it.", reasoning=""))
        result = await anyio.run_process(
            [*COMMAND, "ask", "--base-url", model.base_url, "--mode", "default", "write new.txt"],
            cwd=tmp_path,
            env=_env(),
            check=False,
        )
        tools = model.requests[0].tool_names
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    assert "write_file" in tools  # the default mode offers edits...
    assert "→ Write new.txt" in stderr and "declined" in stderr  # ...and asks, which a pipe cannot answer
    assert not (tmp_path / "new.txt").exists()
    assert result.stdout.decode() == "I could not write it.\n"


def test_ask_rejects_an_unknown_mode(tmp_path: Path) -> None:
    refused = _ask("--offline", "--mode", "no-such-mode", "hi", cwd=tmp_path)
    assert refused.returncode == 2 and "--mode" in refused.stderr


async def _read_until(leader: int, seen: bytearray, wanted: bytes, timeout_s: float = 30) -> None:
    """Read the terminal's output side into ``seen`` until it holds ``wanted`` (bounded)."""
    with anyio.fail_after(timeout_s):
        while wanted not in seen:
            await anyio.wait_readable(leader)
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every process left the terminal
                raise AssertionError(f"the terminal closed before {wanted!r}: {bytes(seen)!r}") from None
            seen += chunk


@pytest.mark.parametrize(("typed", "written"), [(b"y\n", True), (b"\n", False)])
async def test_ask_in_default_mode_asks_y_n_on_a_terminal(tmp_path: Path, typed: bytes, written: bool) -> None:
    from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

    write = ScriptedCall("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")
    leader, follower = pty.openpty()
    seen = bytearray()
    try:
        async with LoopbackModel() as model:
            model.enqueue(ToolCalls((write,)), Answer(text="done", reasoning=""))
            command = [*COMMAND, "ask", "--base-url", model.base_url, "--mode", "default", "write new.txt"]
            async with await anyio.open_process(
                command, stdin=follower, stdout=subprocess.PIPE, stderr=follower, cwd=tmp_path, env=_env()
            ) as process:
                os.close(follower)
                follower = -1
                await _read_until(leader, seen, b"[y/N]")  # asked on the terminal, the call still waiting
                assert not (tmp_path / "new.txt").exists()
                os.write(leader, typed)
                await _read_until(leader, seen, b"allowed" if written else b"declined")
                assert process.stdout is not None
                with anyio.fail_after(30):
                    stdout = b"".join([chunk async for chunk in process.stdout])
                    assert await process.wait() == 0, bytes(seen)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert b"Write new.txt" in seen
    assert (tmp_path / "new.txt").exists() == written
    assert stdout == b"done\n"


async def test_a_retry_that_works_logs_no_warning_and_the_model_list_waits_for_the_answer() -> None:
    async with LoopbackModel() as model:
        model.enqueue(ConnectionReset(), Answer(text="recovered", reasoning=""))
        command = [*COMMAND, "ask", "--base-url", model.base_url, "--model", "m", "hello"]
        with anyio.fail_after(60):
            result = await anyio.run_process(command, env=_env(), check=False, stdin=subprocess.DEVNULL)
        chat = model.requests
    stdout, stderr = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, stderr
    assert stdout == "recovered\n"
    assert "WARNING" not in stderr  # the retry is INFO; the shell user sees only the wait, dimmed
    assert "Retrying in 1.0 s" in stderr
    assert len(chat) == 2 and all(request.path == "/v1/chat/completions" for request in chat)
    if model.model_list_requests:  # asked for (the answer may end the run first): after the answer only
        assert model.model_list_requests[0].received_at >= chat[-1].received_at


def test_ask_shows_each_tool_call_once_with_its_whole_title(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("first\nsecond\n")
    result = _ask("--offline", "what is in notes.txt?", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("notes.txt has 2 lines")
    assert [line for line in result.stderr.splitlines() if line.startswith("→")] == ["→ Read notes.txt"]
