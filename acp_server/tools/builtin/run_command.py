"""``run_command``: a shell command line in the project directory, in the editor's terminal when it has one, else
a local subprocess that no process of it outlives (see ``.._command``)."""

from __future__ import annotations

import dataclasses

import anyio
from pydantic import Field

from .._checkpoint_hook import current_recorder
from .._command import DEFAULT_COMMAND_TIMEOUT_MS, MAX_COMMAND_TIMEOUT_MS, run_local, run_terminal
from .._exceptions import ToolCallError
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["RunCommand", "RunCommandArgs"]


class RunCommandArgs(Args):
    command: str = Field(
        min_length=1,
        description=("A shell command line."),
    )
    timeout_ms: int | None = Field(
        default=DEFAULT_COMMAND_TIMEOUT_MS,
        ge=1,
        le=MAX_COMMAND_TIMEOUT_MS,
        description="Milliseconds before the command is killed.",
    )


def _title(command: str) -> str:
    first, _, rest = command.strip().partition("\n")
    short = first if len(first) <= 80 else first[:79] + "…"
    return f"Run `{short}{' …' if rest.strip() and len(first) <= 80 else ''}`"


class RunCommand(BuiltinTool[RunCommandArgs]):
    """A command may change anything: the mode decides whether the user is asked; the title shows its first line."""

    name = "run_command"
    kind = "execute"
    title = "Run"
    args = RunCommandArgs
    description = (
        "Run a command line with /bin/sh in the project directory, without input; returns its exit code and "
        "output (stdout and stderr, capped at 64 KiB). What it leaves running is killed when it ends."
    )

    async def prepare(self, args: RunCommandArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        command = args.command
        if not command.strip():
            raise ToolCallError("command is empty")
        if "\0" in command:
            raise ToolCallError("command contains a NUL byte")
        timeout_ms = args.timeout_ms or DEFAULT_COMMAND_TIMEOUT_MS
        terminal = None if client is None else client.terminal

        async def run(sink: ContentSink) -> ToolResult:
            recorder = current_recorder()  # what the command changes in the roots is checkpointed (/rewind)
            snapshot = None if recorder is None else await recorder.before_command(workspace)
            note = ""
            try:
                if terminal is not None:
                    result = await run_terminal(terminal, command, workspace, timeout_ms, sink)
                else:
                    result = await run_local(command, workspace, timeout_ms)
            finally:
                if recorder is not None:
                    with anyio.CancelScope(shield=True):  # a cancelled command's changes are recorded too (bounded)
                        note = await recorder.after_command(snapshot)
            return dataclasses.replace(result, output=f"{result.output}\n\n{note}") if note else result

        return self.call(title=_title(command), run=run)
