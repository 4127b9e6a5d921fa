"""Shared helpers of the tools tests: a recording fake of the client's side, and one-line tool calls."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import anyio

from acp_server.domain import ToolCallStarted, ToolContent
from acp_server.errors import RemoteError
from acp_server.tools import (
    TOOL_NAMES,
    ContentSink,
    PermissionChoice,
    PreparedCall,
    TerminalExit,
    TerminalOutput,
    ToolClient,
    ToolResult,
    prepare_call,
)

EXITED_0 = TerminalExit(0, None)


class FakeClient:
    """An editor that records every call in ``calls`` (name, arguments), in order; its :meth:`tool_client` has the
    parts asked for (``read``, ``write``, ``terminal``; permission always).

    Files: ``buffers`` (absolute path → text, the editor's unsaved buffers) answer reads first, then the disk;
    writes go to ``written`` (never to disk). Terminals: ``exit`` answers ``wait_for_terminal_exit`` (None: it
    waits until killed or cancelled); ``output`` answers ``terminal_output``. ``fail`` maps a method name to the
    RemoteError it raises. ``waiting`` is set once ``wait_for_terminal_exit`` is waiting.
    """

    def __init__(
        self,
        *,
        read: bool = False,
        write: bool = False,
        terminal: bool = False,
        exit: TerminalExit | None = EXITED_0,
        output: TerminalOutput | None = None,
    ) -> None:
        self._read, self._write, self._terminal = read, write, terminal
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.buffers: dict[str, str] = {}
        self.written: dict[str, str] = {}
        self.exit = exit
        self.output = output or TerminalOutput("hello from the terminal\n", False, exit)
        self.fail: dict[str, RemoteError] = {}
        self.waiting = anyio.Event()
        self._killed = anyio.Event()

    def _record(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if name in self.fail:
            raise self.fail[name]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def tool_client(self) -> ToolClient:
        return ToolClient(
            self,
            reader=self if self._read else None,
            writer=self if self._write else None,
            terminal=self if self._terminal else None,
        )

    async def request_permission(self, call: ToolCallStarted) -> PermissionChoice:
        self._record("request_permission", call)
        return "allow_once"

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        self._record("read_text_file", path, line, limit)
        text = self.buffers[path] if path in self.buffers else Path(path).read_text()  # noqa: ASYNC240
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        return "".join(lines[start : None if limit is None else start + limit])

    async def write_text_file(self, path: str, content: str) -> None:
        self._record("write_text_file", path, content)
        self.written[path] = content
        self.buffers[path] = content

    async def create_terminal(self, command: str, cwd: str, output_byte_limit: int) -> str:
        self._record("create_terminal", command, cwd, output_byte_limit)
        return "term-1"

    async def wait_for_terminal_exit(self, terminal_id: str) -> TerminalExit:
        self._record("wait_for_terminal_exit", terminal_id)
        self.waiting.set()
        if self.exit is not None:
            return self.exit
        await self._killed.wait()
        return TerminalExit(None, "SIGKILL")

    async def terminal_output(self, terminal_id: str) -> TerminalOutput:
        self._record("terminal_output", terminal_id)
        return self.output

    async def kill_terminal(self, terminal_id: str) -> None:
        self._record("kill_terminal", terminal_id)
        self._killed.set()

    async def release_terminal(self, terminal_id: str) -> None:
        self._record("release_terminal", terminal_id)


def _tool_client(client: FakeClient | None) -> ToolClient | None:
    return None if client is None else client.tool_client()


async def prepare(
    cwd: Path | str,
    name: str,
    client: FakeClient | None = None,
    offered: Collection[str] = TOOL_NAMES,
    additional: Sequence[Path | str] = (),
    **arguments: Any,
) -> PreparedCall:
    """Prepare one call in the project directory ``cwd``, with the session's ``additional`` directories."""
    roots = tuple(str(path) for path in additional)
    return await prepare_call(
        name, json.dumps(arguments), cwd=str(cwd), client=_tool_client(client), offered=offered, additional=roots
    )


class Sink:
    """A content sink that records what it was shown; ``shown`` is set at the first call."""

    def __init__(self) -> None:
        self.contents: list[tuple[ToolContent, ...]] = []
        self.shown = anyio.Event()

    async def __call__(self, content: tuple[ToolContent, ...]) -> None:
        self.contents.append(content)
        self.shown.set()


async def call(
    cwd: Path | str,
    name: str,
    client: FakeClient | None = None,
    sink: ContentSink | None = None,
    additional: Sequence[Path | str] = (),
    **arguments: Any,
) -> ToolResult:
    """Prepare and run one call (a prepare error propagates)."""
    prepared = await prepare(cwd, name, client, additional=additional, **arguments)
    return await prepared.run(sink or Sink())
