"""Slash commands, beside the turn and below the bridge: the built-ins (``/compact``, ``/init``, ``/mode``,
``/model``, ``/rewind``, ``/help``) and a session's MCP servers' prompts as commands (the MCP protocol side is
:mod:`acp_server.mcp`'s); the user's command files (``_files``). :class:`SlashCommands` wraps the
model's turn runner: a prompt is parsed once, here; one that names a command runs it, any other goes to the model as
it is.
"""

from ._files import CommandFiles, UserCommand, expand
from ._slash import COMMANDS, INIT_PROMPT, Command, SlashCommands, parse_command
from ._types import CommandHost, CommandRules, CommandSession, Compacts, ModelChoice, Runner

__all__ = [
    "COMMANDS",
    "INIT_PROMPT",
    "Command",
    "CommandFiles",
    "CommandHost",
    "CommandRules",
    "CommandSession",
    "Compacts",
    "ModelChoice",
    "Runner",
    "SlashCommands",
    "UserCommand",
    "expand",
    "parse_command",
]
