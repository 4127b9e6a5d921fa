"""A session's MCP servers' prompts as slash commands (``/mcp__<server>__<prompt> args``), beside the built-ins.

A session offers the prompts of its servers that are up (see :mod:`acp_server.mcp` for their names, arguments and
what a result becomes). Running one binds the typed arguments, asks the server (``prompts/get``, bounded by the MCP
call timeout, cancelled with the prompt), and hands what it gives to the model as the user's prompt in place of the
command's text (the prompt's other parts, say attached files, follow it): a normal turn, recorded in the history as
sent. Bad arguments, a server's refusal or silence: a message to the user, the turn ends, the model is not called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar
from uuid import uuid4

from ..domain import Emit, Prompt, StopReason, TextChunk, TextPart
from ..mcp import McpPrompt, McpPromptError, bind_arguments, prompt_parts
from ._types import CommandSession, Runner

if TYPE_CHECKING:
    from ..tools import ToolClient

__all__ = ["prompt_commands", "run_prompt"]

S = TypeVar("S", bound=CommandSession)


def prompt_commands(session: CommandSession) -> tuple[McpPrompt, ...]:
    """The prompts the session's MCP servers offer now (none without servers)."""
    return () if session.mcp is None else session.mcp.prompts()


async def run_prompt(
    command: McpPrompt,
    argument: str,
    session: S,
    prompt: Prompt,
    emit: Emit,
    client: ToolClient | None,
    runner: Runner[S],
) -> StopReason:
    """Run ``command`` with the text typed after it (module rules)."""
    servers = session.mcp
    try:
        arguments = bind_arguments(command, argument)
        if servers is None:
            raise McpPromptError(f"/{command.command}: the session has no MCP servers.")
        try:
            result = await servers.get_prompt(command, arguments)
        except McpPromptError as exc:
            raise McpPromptError(f"/{command.command} failed: {exc}.") from None
        parts = prompt_parts(result, command)
    except McpPromptError as exc:
        await emit(TextChunk(str(exc), message_id=f"command-{uuid4().hex}"))
        return "end_turn"
    first = next(index for index, part in enumerate(prompt.parts) if isinstance(part, TextPart))
    return await runner(session, Prompt((*prompt.parts[:first], *parts, *prompt.parts[first + 1 :])), emit, client)
