"""The editor of the process-hardening tests: the official ACP Python SDK's ``Client``, allowing every permission
request, running terminals as real subprocesses of the test; and helpers to watch processes that are not ours."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any

import anyio
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

BYPASS = ("--allow-bypass-permissions", "--default-mode", "bypass-permissions")


class Editor:
    """Allows every permission request (after calling ``on_permission``, when given); ``terminal/*`` runs the
    command with the editor's own environment."""

    def __init__(self, on_permission: Callable[[], None] | None = None) -> None:
        self.on_permission = on_permission
        self.permission_requests: list[Any] = []
        self.updates: list[Any] = []
        self.terminals: dict[str, tuple[asyncio.subprocess.Process, bytearray, asyncio.Future[None]]] = {}

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kwargs: Any) -> Any:
        self.permission_requests.append(tool_call)
        if self.on_permission is not None:
            self.on_permission()
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="allow_once"))

    async def create_terminal(self, session_id: str, command: str, cwd: str | None = None, **kwargs: Any) -> Any:
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        output = bytearray()

        async def read() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(4096):
                output.extend(chunk)

        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = (process, output, asyncio.ensure_future(read()))
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        process, _, reader = self.terminals[terminal_id]
        code = await process.wait()
        await reader
        return WaitForTerminalExitResponse(exit_code=code)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        process, output, _ = self.terminals[terminal_id]
        code = process.returncode
        status = None if code is None else TerminalExitStatus(exit_code=code)
        return TerminalOutputResponse(output=output.decode(errors="replace"), truncated=False, exit_status=status)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.terminals[terminal_id][0].pid, 9)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        process = self.terminals[terminal_id][0]
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            await process.wait()


def capabilities(*, terminal: bool) -> ClientCapabilities:
    return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=terminal)


async def eventually(condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
    """Poll a condition about another process (a file it writes): bounded, never a fixed sleep."""
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def exited(pid: int, timeout_s: float = 10.0) -> bool:
    """Whether a process that is not our child ends within ``timeout_s`` (its pidfd turns readable when it does)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        with anyio.move_on_after(timeout_s):
            await anyio.wait_readable(pidfd)
            return True
        return False
    finally:
        os.close(pidfd)


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 9)
