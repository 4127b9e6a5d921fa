"""``task``: a piece of work handed to a child session (a subagent) — its own conversation and context budget, the
same model and roots — whose final answer is this call's result.

The child works ``read-only`` unless ``write`` is set, and then in the parent session's mode (never a stronger
one): its edits and commands ask the user as the parent's would. The call itself changes nothing (ACP kind
``think``: offered in every mode, never asking); the turn runs the child (:class:`~.._types.SubagentRunner`).
"""

from __future__ import annotations

from pydantic import Field

from ...domain import TextContent
from .._exceptions import ToolCallError
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["Task", "TaskArgs"]


class TaskArgs(Args):
    description: str = Field(min_length=1, max_length=200, description="A few words.")
    prompt: str = Field(min_length=1, max_length=100_000, description="The full task.")
    write: bool = Field(default=False, description="Allow edits and commands.")


class Task(BuiltinTool[TaskArgs]):
    """A subagent: the title names its description; its progress shows in the call, its answer is the result."""

    name = "task"
    kind = "think"
    title = "Task"
    args = TaskArgs
    description = "Run a self-contained task in a subagent; returns its answer."

    async def prepare(self, args: TaskArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        runner = None if client is None else client.subagent
        if runner is None:
            raise ToolCallError("subagents are not available in this session")
        description, prompt, write = args.description.strip(), args.prompt, args.write

        async def run(sink: ContentSink) -> ToolResult:
            answer = await runner(description, prompt, write, sink)
            return ToolResult(answer, (TextContent(answer),), raw_output={"answer": answer})

        return self.call(title=f"Task: {description}", run=run)
