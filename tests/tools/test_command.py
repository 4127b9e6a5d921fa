"""run_command as a local subprocess (its own process group: timeouts and cancellation kill it all, grandchildren
included, and reap it) on asyncio and trio, and through a client's terminal (create → show → wait → output →
release; kill and release on a timeout, an error or a cancel)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

import acp_server.tools._command as command_module
from acp_server.domain import TerminalContent, TextContent, ToolContent
from acp_server.errors import RemoteError
from acp_server.tools import OUTPUT_LIMIT_BYTES, PreparedCall, TerminalExit, TerminalOutput, ToolCallError

from ._support import FakeClient, Sink, call, prepare

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])]


def _state(pid: int) -> str | None:
    """The process's state letter, None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return None


async def assert_gone(pid: int) -> None:
    """The process ends (dead, or a zombie for init to reap) soon: its pidfd turns readable when it exits."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(5):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def run(prepared: PreparedCall) -> None:
    await prepared.run(Sink())


# --- local --------------------------------------------------------------------------------------------------


async def test_exit_code_and_merged_output(tmp_path: Path) -> None:
    prepared = await prepare(tmp_path, "run_command", command="echo out; echo err >&2; pwd; exit 3")
    assert (prepared.title, prepared.kind, prepared.needs_permission) == (
        "Run `echo out; echo err >&2; pwd; exit 3`",
        "execute",
        True,
    )
    result = await prepared.run(Sink())
    assert result.output == f"Exit code: 3\nout\nerr\n{tmp_path}\n"
    assert not result.failed  # a non-zero exit is a completed call: the model sees it
    assert result.content == (TextContent(result.output),)
    size = len(f"out\nerr\n{tmp_path}\n")
    assert result.raw_output == {"exitCode": 3, "signal": None, "timedOut": False, "outputBytes": size}


async def test_the_agents_secrets_are_not_passed_to_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-agent")
    monkeypatch.setenv("ACP_SERVER_TOKEN", "token-of-the-daemon")
    monkeypatch.setenv("SOME_USER_SETTING", "kept")
    result = await call(tmp_path, "run_command", command="env")
    assert "sk-secret-of-the-agent" not in result.output and "token-of-the-daemon" not in result.output
    assert "SOME_USER_SETTING=kept" in result.output


async def test_no_input_and_no_output(tmp_path: Path) -> None:
    result = await call(tmp_path, "run_command", command="cat")  # stdin is /dev/null: cat ends at once
    assert result.output == "Exit code: 0\n(no output)"


async def test_killed_by_a_signal(tmp_path: Path) -> None:
    result = await call(tmp_path, "run_command", command="kill -TERM $$")
    assert result.output.startswith("Killed by signal SIGTERM")
    assert result.raw_output["signal"] == "SIGTERM"  # type: ignore[index]


async def test_a_timeout_kills_the_group_and_fails_the_call(tmp_path: Path) -> None:
    result = await call(
        tmp_path, "run_command", command="sleep 1000 & echo $! > bg.pid; echo started; wait", timeout_ms=300
    )
    assert result.failed
    assert result.output == "Timed out after 300 ms: the command was killed\nstarted\n"
    assert result.raw_output["timedOut"] is True  # type: ignore[index]
    await assert_gone(int((tmp_path / "bg.pid").read_text()))


async def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command_module, "_TERM_GRACE_S", 0.1)
    result = await call(tmp_path, "run_command", command="trap '' TERM; echo $$ > sh.pid; sleep 1000", timeout_ms=200)
    assert result.failed and result.output.startswith("Timed out after 200 ms")
    await assert_gone(int((tmp_path / "sh.pid").read_text()))


async def test_background_processes_do_not_outlive_the_call(tmp_path: Path) -> None:
    """The background sleep keeps the pipe open: without killing the group the call would wait for it."""
    with anyio.fail_after(10):
        result = await call(tmp_path, "run_command", command="sleep 1000 & echo $!")
    assert result.output.startswith("Exit code: 0\n")
    await assert_gone(int(result.output.split("\n")[1]))


async def test_cancel_kills_the_shell_and_its_grandchild_and_reaps_them(tmp_path: Path) -> None:
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    prepared = await prepare(tmp_path, "run_command", command=f"sleep 1000 & echo $$ $! > {fifo}; wait")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, prepared)
        with anyio.fail_after(10):
            pids = await anyio.to_thread.run_sync(fifo.read_text)  # blocks until the shell wrote them
        tasks.cancel_scope.cancel()
    shell, sleeper = (int(pid) for pid in pids.split())
    assert _state(shell) is None  # our child: reaped before run returned
    await assert_gone(sleeper)


async def test_huge_output_keeps_its_beginning_and_end(tmp_path: Path) -> None:
    result = await call(
        tmp_path, "run_command", command="echo BEGIN; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END"
    )
    assert len(result.output.encode()) <= OUTPUT_LIMIT_BYTES
    assert result.output.startswith("Exit code: 0\nBEGIN\nxxx")
    assert result.output.endswith("xxx\nEND\n")
    assert "bytes of output omitted …]" in result.output
    assert result.raw_output["outputBytes"] == 3_000_011  # type: ignore[index]


async def test_an_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError, match="command is empty"):
        await prepare(tmp_path, "run_command", command="   ")


async def test_a_long_or_multiline_command_gets_a_short_title(tmp_path: Path) -> None:
    assert (await prepare(tmp_path, "run_command", command="make\nmake test")).title == "Run `make …`"
    long = await prepare(tmp_path, "run_command", command="x" * 200)
    assert long.title == "Run `" + "x" * 79 + "…`"


# --- through the client's terminal --------------------------------------------------------------------------


async def test_the_terminal_sequence(tmp_path: Path) -> None:
    client = FakeClient(terminal=True)
    sink = Sink()
    result = await call(tmp_path, "run_command", client, sink, command="pytest -q", timeout_ms=5000)
    assert client.calls == [
        ("create_terminal", ("pytest -q", str(tmp_path), OUTPUT_LIMIT_BYTES)),
        ("wait_for_terminal_exit", ("term-1",)),
        ("terminal_output", ("term-1",)),
        ("release_terminal", ("term-1",)),
    ]
    assert sink.contents == [(TerminalContent("term-1"),)]
    assert result.content == (TerminalContent("term-1"),)
    assert result.output == "Exit code: 0\nhello from the terminal\n"
    assert not result.failed
    assert result.raw_output == {"exitCode": 0, "signal": None, "timedOut": False, "terminalId": "term-1"}


async def test_the_sink_sees_the_terminal_before_the_wait(tmp_path: Path) -> None:
    client = FakeClient(terminal=True)
    seen: list[list[str]] = []

    async def sink(content: tuple[ToolContent, ...]) -> None:
        seen.append(list(client.names))

    await call(tmp_path, "run_command", client, sink, command="make")
    assert seen == [["create_terminal"]]


async def test_a_terminal_timeout_kills_then_reads_then_releases(tmp_path: Path) -> None:
    client = FakeClient(terminal=True, exit=None, output=TerminalOutput("partial", True, None))
    result = await call(tmp_path, "run_command", client, command="sleep 9", timeout_ms=50)
    assert client.names == [
        "create_terminal",
        "wait_for_terminal_exit",
        "kill_terminal",
        "terminal_output",
        "release_terminal",
    ]
    assert result.failed
    assert result.output == (
        "Timed out after 50 ms: the command was killed\n"
        "[the beginning of the output was cut: the terminal keeps its last 64 KiB]\npartial"
    )


async def test_a_cancelled_terminal_is_killed_and_released(tmp_path: Path) -> None:
    client = FakeClient(terminal=True, exit=None)
    prepared = await prepare(tmp_path, "run_command", client, command="sleep 9")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run, prepared)
        await client.waiting.wait()
        tasks.cancel_scope.cancel()
    assert client.names == ["create_terminal", "wait_for_terminal_exit", "kill_terminal", "release_terminal"]


async def test_terminal_errors_fail_the_call_and_still_release(tmp_path: Path) -> None:
    client = FakeClient(terminal=True)
    client.fail["wait_for_terminal_exit"] = RemoteError("terminal gone", code=-32603)
    result = await call(tmp_path, "run_command", client, command="ls")
    assert result.failed and result.output == "Error: the editor's terminal failed: terminal gone"
    assert client.names == ["create_terminal", "wait_for_terminal_exit", "kill_terminal", "release_terminal"]

    refusing = FakeClient(terminal=True)
    refusing.fail["create_terminal"] = RemoteError("no terminals here")
    result = await call(tmp_path, "run_command", refusing, command="ls")
    assert result.failed and result.output == "Error: the editor could not start the command: no terminals here"
    assert refusing.names == ["create_terminal"]

    releasing = FakeClient(terminal=True, exit=TerminalExit(None, "SIGSEGV"))
    releasing.fail["release_terminal"] = RemoteError("already released")
    result = await call(tmp_path, "run_command", releasing, command="ls")
    assert not result.failed and result.output.startswith("Killed by signal SIGSEGV")


async def test_no_terminal_capability_runs_locally(tmp_path: Path) -> None:
    client = FakeClient(read=True, write=True, terminal=False)
    result = await call(tmp_path, "run_command", client, command="echo local")
    assert result.output == "Exit code: 0\nlocal\n" and client.calls == []
