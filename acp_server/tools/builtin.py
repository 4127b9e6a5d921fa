"""The eight built-in tools as registry :class:`~acp_server.tools.registry.Tool` values (specs from ``_specs``,
preparers from the tool modules), and what the rest of the server reads of them.

Names and parameters are a contract (see ``_specs``); they are offered in this order, before any other source's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._command import prepare_run_command
from ._exec_config import guard_exec_config
from ._files import prepare_edit_file, prepare_list_directory, prepare_read_file, prepare_write_file
from ._plan import prepare_update_plan
from ._search import prepare_glob, prepare_grep
from ._specs import SPECS
from ._types import PreparedCall, ToolClient
from ._workspace import Workspace
from .registry import Preparer, Tool, ToolSet

__all__ = ["BUILTIN_TOOLS", "READ_ONLY_TOOLS", "TOOL_NAMES", "builtin_tool_set", "openai_tools"]

_PREPARERS: dict[str, Preparer] = {
    "read_file": prepare_read_file,
    "list_directory": prepare_list_directory,
    "glob": prepare_glob,
    "grep": prepare_grep,
    "write_file": prepare_write_file,
    "edit_file": prepare_edit_file,
    "run_command": prepare_run_command,
    "update_plan": prepare_update_plan,
}


def _guarded(prepare: Preparer) -> Preparer:
    """``prepare``, whose edit of a file that makes the user's tools run code is announced as a command."""

    async def guarded(args: Any, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        return guard_exec_config(await prepare(args, workspace, client), workspace)

    return guarded


BUILTIN_TOOLS: tuple[Tool, ...] = tuple(
    Tool(
        spec.name,
        spec.description,
        spec.parameters,
        spec.kind,
        read_only=not spec.needs_permission,
        needs_permission=spec.needs_permission,
        prepare=_guarded(_PREPARERS[spec.name]) if spec.kind == "edit" else _PREPARERS[spec.name],
        args=spec.args,
        title=spec.title or spec.name.split("_", 1)[0].capitalize(),  # the verb: Read, List, ..., Edit, Run
    )
    for spec in SPECS.values()
)
"""The built-in tools, in offer order."""

TOOL_NAMES: tuple[str, ...] = tuple(tool.name for tool in BUILTIN_TOOLS)
"""The built-in tools' names, in the order they are offered to the model."""

READ_ONLY_TOOLS: frozenset[str] = frozenset(tool.name for tool in BUILTIN_TOOLS if tool.read_only)
"""The built-in tools that change nothing (the ``read-only`` mode offers only these)."""

BUILTIN: ToolSet = ToolSet(BUILTIN_TOOLS)
"""The built-in tools alone (shared: never add a source to it; a session takes :func:`builtin_tool_set`)."""


def builtin_tool_set() -> ToolSet:
    """A new session's tool set: the built-in tools, to which its MCP servers' tools are added."""
    return BUILTIN.copy()


def openai_tools(names: Iterable[str]) -> list[dict[str, Any]]:
    """The OpenAI function-calling entries (``tools`` of a chat request) of built-in ``names``, in
    :data:`TOOL_NAMES` order whatever the order of ``names`` (so a request's prefix stays stable). The entries are
    shared: do not mutate them. An unknown name raises ``ValueError``."""
    return BUILTIN.entries(names)
