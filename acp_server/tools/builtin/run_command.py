"""``run_command``: a shell command line in the project directory, in the editor's terminal when it has one, else
a local subprocess that no process of it outlives (see ``.._command``).

In ``sandbox`` mode it runs locally inside the kernel sandbox (``.._sandbox``; never in the editor's terminal, whose
process the agent cannot confine), unasked; ``outside_sandbox`` with a ``reason`` asks the user instead (kind
``execute``, the reason in the title), and an "always" answer is kept per command prefix (its first two words).
"""

from __future__ import annotations

import dataclasses
import shlex

import anyio
from pydantic import Field

from .. import _sandbox
from .._checkpoint_hook import current_recorder
from .._command import DEFAULT_COMMAND_TIMEOUT_MS, MAX_COMMAND_TIMEOUT_MS, run_local, run_terminal
from .._exceptions import ToolCallError
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["RunCommand", "RunCommandArgs", "command_prefix"]


class RunCommandArgs(Args):
    command: str = Field(
        min_length=1,
    )
    timeout_ms: int | None = Field(
        default=DEFAULT_COMMAND_TIMEOUT_MS,
        ge=1,
        le=MAX_COMMAND_TIMEOUT_MS,
    )
    outside_sandbox: bool = Field(
        default=False,
        description=(
            "Sandbox mode: run unsandboxed (the user is asked), only after it failed inside for want of network "
            "or writes."
        ),
    )
    reason: str | None = Field(
        default=None,
        max_length=200,
        description="Shown to the user.",
    )


SANDBOX_HINT = (
    "\n[This ran inside the sandbox: no network, writes only inside the project and $TMPDIR, credentials hidden. "
    "If it failed only because of that, call run_command again with outside_sandbox: true and a reason; the user "
    "will be asked.]"
)
"""What the model reads after a sandboxed command that did not succeed: why it may have failed, and the way out."""


def command_prefix(command: str) -> str:
    """What an "always" answer to running ``command`` outside the sandbox covers: its first two words."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return " ".join(words[:2])


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
        "Run a /bin/sh command line in the project directory, no input; returns exit code and output (capped at "
        "64 KiB); what it leaves running is killed. Sandbox mode: no network, writes only in the project and "
        "$TMPDIR."
    )

    async def prepare(self, args: RunCommandArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        command = args.command
        if not command.strip():
            raise ToolCallError("command is empty")
        if "\0" in command:
            raise ToolCallError("command contains a NUL byte")
        timeout_ms = args.timeout_ms or DEFAULT_COMMAND_TIMEOUT_MS
        terminal = None if client is None else client.terminal

        sandboxed = workspace.sandboxed and not args.outside_sandbox
        if sandboxed and _sandbox.support().mechanism is None:
            raise ToolCallError(f"the sandbox does not work on this host: {_sandbox.support().detail}")
        reason = (args.reason or "").strip()
        if workspace.sandboxed and args.outside_sandbox and not reason:
            raise ToolCallError("outside_sandbox needs a reason: say why the command cannot run in the sandbox")

        async def run(sink: ContentSink) -> ToolResult:
            recorder = current_recorder()  # what the command changes in the roots is checkpointed (/rewind)
            snapshot = None if recorder is None else await recorder.before_command(workspace)
            note = ""
            try:
                if sandboxed:
                    result = await run_local(command, workspace, timeout_ms, sandboxed=True)
                    if not result.output.startswith("Exit code: 0\n"):
                        result = dataclasses.replace(result, output=result.output + SANDBOX_HINT)
                elif terminal is not None:
                    result = await run_terminal(terminal, command, workspace, timeout_ms, sink)
                else:
                    result = await run_local(command, workspace, timeout_ms)
            finally:
                if recorder is not None:
                    with anyio.CancelScope(shield=True):  # a cancelled command's changes are recorded too (bounded)
                        note = await recorder.after_command(snapshot)
            return dataclasses.replace(result, output=f"{result.output}\n\n{note}") if note else result

        if sandboxed:
            return dataclasses.replace(self.call(title=_title(command) + " in the sandbox", run=run), sandboxed=True)
        if workspace.sandboxed:
            title = f"Run outside the sandbox ({reason}): {_title(command)[4:]}"
            rule = f"run_command outside the sandbox: {command_prefix(command)}"
            return dataclasses.replace(self.call(title=title, run=run), rule=rule)
        return self.call(title=_title(command), run=run)
