"""How ``builtin/run_command`` runs a shell command line: in the client's terminal when it has one, else a local
subprocess.

Terminal (``terminal/*``): create → show it in the call (``content_sink``) → wait for the exit → output → release.
Every request is bounded, so an editor that never answers ends the call ``failed`` within the command's timeout plus
at most 7 s: the create and the wait share the timeout (a create not answered by then fails the call; a terminal the
editor creates later is unknown to the agent, its id never read); at the timeout the terminal is killed (within 2 s);
the output then has 3 s (an output not sent in time is a note); release always happens, shielded, within 2 s. A
cancelled or failed run kills the terminal first. A late answer to any of them is ignored.

Local: ``/bin/sh -c <command>`` in the project directory, in its own process group (``start_new_session``), stdin
``/dev/null``, stdout and stderr merged into one pipe. A watchdog (:mod:`._command_watchdog`) kills that group if
the agent dies, however it dies, and the command starts only once the watchdog does (:data:`_GATE`); the agent
stops the watchdog once the group is gone. The output is read with a bound (the
first and the last 30 KiB are kept). When the shell exits, what it left in its group is killed (so no background
process outlives the call, and the pipe closes). At the timeout the group gets SIGTERM, then SIGKILL after a short
grace; on cancellation it gets SIGKILL at once; in every case the shell is reaped before ``run`` returns or raises.

A non-zero exit status is a completed call (the model needs to see the failure); a command that could not start,
or that timed out, is a failed one. The model gets the exit status (or signal) line, then the output.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable

import anyio
from anyio.abc import ByteReceiveStream, Process

from ..domain import TerminalContent, TextContent
from ..errors import RemoteError
from . import _command_watchdog, _sandbox, _unprivileged
from ._exceptions import ToolCallError
from ._output import OUTPUT_LIMIT_BYTES
from ._types import ContentSink, EditorTerminal, TerminalExit, TerminalOutput, ToolResult
from ._workspace import Workspace

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT_MS",
    "KEEP_HEAD_BYTES",
    "KEEP_TAIL_BYTES",
    "MAX_COMMAND_TIMEOUT_MS",
    "run_local",
    "run_terminal",
]

logger = logging.getLogger(__name__)

DEFAULT_COMMAND_TIMEOUT_MS = 120_000
MAX_COMMAND_TIMEOUT_MS = 600_000
KEEP_HEAD_BYTES = 30 * 1024
KEEP_TAIL_BYTES = 30 * 1024
_TERM_GRACE_S = 2.0  # SIGTERM → SIGKILL at a timeout
_DRAIN_S = 1.0  # after the shell exits and its group is killed, how long the pipe may take to close
_REAP_S = 5.0  # a SIGKILLed shell is reaped within this (bounded, in case it is stuck in the kernel)
_KILL_S = 2.0  # after an editor terminal's timeout, its kill may take this long
_OUTPUT_S = 3.0  # then its output
_RELEASE_S = 2.0  # then its (shielded) release
_NO_OUTPUT = TerminalOutput(f"[the editor did not send the output within {_OUTPUT_S:g} s]", False, None)


class _Capture:
    """A command's output, bounded: the first :data:`KEEP_HEAD_BYTES` and the last :data:`KEEP_TAIL_BYTES`."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = KEEP_HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > KEEP_TAIL_BYTES:
                del self.tail[: len(self.tail) - KEEP_TAIL_BYTES]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return (self.head + self.tail).decode("utf-8", "replace")
        return (
            self.head.decode("utf-8", "replace")
            + f"\n[… {omitted} bytes of output omitted …]\n"
            + self.tail.decode("utf-8", "replace")
        )


def _status_line(exit_code: int | None, signal_name: str | None, timed_out: bool, timeout_ms: int) -> str:
    if timed_out:
        return f"Timed out after {timeout_ms} ms: the command was killed"
    if signal_name is not None:
        return f"Killed by signal {signal_name}"
    if exit_code is None:
        return "Exit status unknown"
    return f"Exit code: {exit_code}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _pump(stream: ByteReceiveStream, capture: _Capture, done: anyio.Event) -> None:
    try:
        async for chunk in stream:
            capture.add(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


async def _reap(process: Process) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_S):
        await process.wait()


SECRET_ENV = frozenset({"OPENAI_API_KEY", "ACP_SERVER_TOKEN", "ACP_SERVER_STORE"})
"""The agent's own secrets (its model key, its daemon token, its store URL with the database password): never passed
to the commands the model runs, whose output the model reads, nor to stdio MCP servers."""


def _command_env(cwd: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in SECRET_ENV}
    env["PWD"] = cwd
    return env


@functools.cache
def _drop_ptrace_prefix() -> tuple[str, ...]:
    """What drops ``CAP_SYS_PTRACE`` before the shell starts, as root on Linux: util-linux's ``setpriv`` when it is
    installed (a C program, ~1 ms), else :mod:`._unprivileged` (a ``python -I -S``, ~20 ms). Elsewhere nothing."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setpriv is not None:
        return (setpriv, "--bounding-set=-sys_ptrace")
    if sys.executable:
        return (sys.executable, "-I", "-S", _unprivileged.__file__)
    return ()


_GATE = 'read -r _ && exec /bin/sh -c "$0" </dev/null'
"""The shell waits for one line on stdin (the agent sends it once the watchdog is started; end of file, when the
agent died before, runs nothing), then becomes ``/bin/sh -c command`` (same pid) with stdin ``/dev/null``."""


def _shell(command: str, sandbox: _sandbox.Confinement | None = None) -> list[str]:
    """``/bin/sh -c command`` behind :data:`_GATE`; as root on Linux, without ``CAP_SYS_PTRACE``
    (:func:`_drop_ptrace_prefix`); in ``sandbox`` when one is given."""
    shell = ["/bin/sh", "-c", _GATE, command]
    return [*_drop_ptrace_prefix(), *(shell if sandbox is None else sandbox.wrap(shell))]


def _open_gate(go_w: int) -> None:
    """Let the gated shell run its command."""
    try:
        with contextlib.suppress(OSError):  # the shell is gone already: nothing to let run
            os.write(go_w, b"\n")
    finally:
        os.close(go_w)


async def _watch(pgid: int, cwd: str) -> tuple[Process | None, int]:
    """A watchdog that kills the group ``pgid`` when the agent dies, and the end of the pipe it watches (the agent
    closes it after stopping the watchdog). No watchdog (None) when no Python can run it or it cannot start."""
    death_r, death_w = os.pipe()
    try:
        if not sys.executable:
            return None, death_w
        with anyio.CancelScope(shield=True):
            watchdog = await anyio.open_process(
                [sys.executable, "-I", "-S", _command_watchdog.__file__, str(pgid)],
                env=_command_env(cwd),  # not the agent's own: its environment shows in /proc
                stdin=death_r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # apart from the command's group and from the agent's
            )
    except OSError as exc:
        logger.warning("the watchdog of a command could not be started: %s", exc.strerror or exc)
        return None, death_w
    finally:
        os.close(death_r)
    return watchdog, death_w


async def _unwatch(watchdog: Process | None, death_w: int) -> None:
    """Stop the watchdog (the group it watches is gone), reap it, then close its pipe."""
    try:
        if watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                watchdog.kill()
            await _reap(watchdog)
            with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_S):
                await watchdog.aclose()
    finally:
        os.close(death_w)


async def run_local(command: str, workspace: Workspace, timeout_ms: int, *, sandboxed: bool = False) -> ToolResult:
    """Run ``command`` locally (``sandboxed``: inside the kernel sandbox, :mod:`._sandbox`, with a private
    ``TMPDIR`` removed after)."""
    if not sandboxed:
        return await _run_local(command, workspace, timeout_ms, None)
    with _sandbox.Confinement(workspace.cwd, [root.real for root in workspace.roots]) as sandbox:
        return await _run_local(command, workspace, timeout_ms, sandbox)


async def _run_local(
    command: str, workspace: Workspace, timeout_ms: int, sandbox: _sandbox.Confinement | None
) -> ToolResult:
    go_r, go_w = os.pipe()  # the gate: the command starts only once its watchdog does
    env = _command_env(workspace.cwd) if sandbox is None else sandbox.env(_command_env(workspace.cwd))
    try:
        with anyio.CancelScope(shield=True):  # a cancel must not leave a started process without its handle
            process = await anyio.open_process(
                _shell(command, sandbox),
                cwd=workspace.cwd,
                env=env,
                stdin=go_r,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        os.close(go_w)
        raise ToolCallError(f"the command could not be started: {exc.strerror or exc}") from None
    finally:
        os.close(go_r)
    pgid = process.pid  # a new session: the shell leads its own process group
    watchdog: Process | None = None
    death_w = -1
    try:
        with anyio.CancelScope(shield=True):
            try:
                watchdog, death_w = await _watch(pgid, workspace.cwd)
            finally:
                _open_gate(go_w)
        return await _supervise(process, pgid, timeout_ms)
    finally:
        if death_w >= 0:
            await _unwatch(watchdog, death_w)


async def _supervise(process: Process, pgid: int, timeout_ms: int) -> ToolResult:
    """Wait for the shell under the timeout, kill what is left of its group, and build the result."""
    capture = _Capture()
    timed_out = False
    assert process.stdout is not None
    try:
        async with anyio.create_task_group() as tasks:
            drained = anyio.Event()
            tasks.start_soon(_pump, process.stdout, capture, drained)
            with anyio.move_on_after(timeout_ms / 1000) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                _kill_group(pgid, signal.SIGTERM)
                with anyio.move_on_after(_TERM_GRACE_S):
                    await process.wait()
            _kill_group(pgid, signal.SIGKILL)  # what is left of the group: nothing outlives the call
            await _reap(process)
            with anyio.move_on_after(_DRAIN_S):
                await drained.wait()
            tasks.cancel_scope.cancel()
    except BaseException:
        _kill_group(pgid, signal.SIGKILL)
        await _reap(process)
        raise
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_S):
            await process.aclose()  # the pipe and its transport; the shell is reaped already
    code = process.returncode
    signal_name = _signal_name(-code) if code is not None and code < 0 else None
    exit_code = code if code is not None and code >= 0 else None
    output = capture.text()
    text = _status_line(exit_code, signal_name, timed_out, timeout_ms) + "\n" + (output or "(no output)")
    raw = {
        "exitCode": exit_code,
        "signal": signal_name,
        "timedOut": timed_out,
        "outputBytes": capture.total,
    }
    return ToolResult(text, (TextContent(text),), raw, failed=timed_out)


async def _quietly(call: Awaitable[None], what: str) -> None:
    try:
        await call
    except RemoteError as exc:
        logger.debug("terminal/%s failed: %s", what, exc)


async def run_terminal(
    terminal: EditorTerminal, command: str, workspace: Workspace, timeout_ms: int, sink: ContentSink
) -> ToolResult:
    deadline = anyio.current_time() + timeout_ms / 1000
    terminal_id: str | None = None
    with anyio.CancelScope(deadline=deadline):
        try:
            terminal_id = await terminal.create_terminal(command, workspace.cwd, OUTPUT_LIMIT_BYTES)
        except RemoteError as exc:
            raise ToolCallError(f"the editor could not start the command: {exc}") from exc
    if terminal_id is None:
        raise ToolCallError(
            f"the editor did not answer terminal/create within the command's timeout ({timeout_ms} ms); the "
            "command may not have run"
        )
    content = (TerminalContent(terminal_id),)
    ended = False
    try:
        await sink(content)
        exit_status: TerminalExit | None = None
        with anyio.CancelScope(deadline=deadline) as waiting:
            exit_status = await terminal.wait_for_terminal_exit(terminal_id)
        timed_out = waiting.cancelled_caught
        if timed_out:
            with anyio.move_on_after(_KILL_S):
                await terminal.kill_terminal(terminal_id)
        result = _NO_OUTPUT
        with anyio.move_on_after(_OUTPUT_S):
            result = await terminal.terminal_output(terminal_id)
        ended = True
    except RemoteError as exc:
        raise ToolCallError(f"the editor's terminal failed: {exc}") from exc
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_S):
            if not ended:
                await _quietly(terminal.kill_terminal(terminal_id), "kill")
            await _quietly(terminal.release_terminal(terminal_id), "release")
    exit_status = exit_status or result.exit
    exit_code = exit_status.exit_code if exit_status is not None else None
    signal_name = exit_status.signal if exit_status is not None else None
    lines = [_status_line(exit_code, signal_name, timed_out, timeout_ms)]
    if result.truncated:
        lines.append(
            f"[the beginning of the output was cut: the terminal keeps its last {OUTPUT_LIMIT_BYTES // 1024} KiB]"
        )
    lines.append(result.output or "(no output)")
    raw = {"exitCode": exit_code, "signal": signal_name, "timedOut": timed_out, "terminalId": terminal_id}
    return ToolResult("\n".join(lines), content, raw, failed=timed_out)
