"""The built-in tools: one module per tool, each one :class:`~._tool.BuiltinTool` subclass (its arguments model,
name, kind, title, description and ``prepare``), collected here as registry
:class:`~acp_server.tools.registry.Tool` values, and what the rest of the server reads of them.

Names and parameters are a contract (see ``_tool``); the tools are offered in :data:`CLASSES` order, before any
other source's. Adding a tool is adding its module and naming its class in :data:`CLASSES`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from .._web import WebPolicy
from ..registry import Tool, ToolSet
from ._tool import BuiltinTool
from .edit_file import EditFile
from .glob import Glob
from .grep import Grep
from .list_directory import ListDirectory
from .read_file import ReadFile
from .run_command import RunCommand
from .skill import SkillTool
from .task import Task
from .update_plan import UpdatePlan
from .web_fetch import WebFetch
from .write_file import WriteFile

__all__ = ["BUILTIN", "BUILTIN_TOOLS", "CLASSES", "READ_ONLY_TOOLS", "TOOL_NAMES", "builtin_tool_set", "openai_tools"]

CLASSES: tuple[type[BuiltinTool[Any]], ...] = (
    ReadFile,
    ListDirectory,
    Glob,
    Grep,
    WriteFile,
    EditFile,
    RunCommand,
    WebFetch,
    Task,
    SkillTool,
    UpdatePlan,
)
"""Every built-in tool's class, in offer order."""

BUILTIN_TOOLS: tuple[Tool, ...] = tuple(cls().tool() for cls in CLASSES)
"""The built-in tools, in offer order."""

TOOL_NAMES: tuple[str, ...] = tuple(tool.name for tool in BUILTIN_TOOLS)
"""The built-in tools' names, in the order they are offered to the model."""

READ_ONLY_TOOLS: frozenset[str] = frozenset(tool.name for tool in BUILTIN_TOOLS if tool.read_only)
"""The built-in tools that change nothing (the ``read-only`` mode offers only these)."""

BUILTIN: ToolSet = ToolSet(BUILTIN_TOOLS)
"""The built-in tools alone (shared: never add a source to it; a session takes :func:`builtin_tool_set`)."""


def builtin_tool_set(web: WebPolicy | None = None, skills_dir: str | None = None) -> ToolSet:
    """A new session's tool set: the built-in tools (``web``: how ``web_fetch`` reaches the network, None: the
    default policy; ``skills_dir``: the user's skills, None: none), to which its MCP servers' tools are added."""
    if web is None and skills_dir is None:
        return BUILTIN.copy()
    fetch = WebFetch(web or WebPolicy()).tool()
    if web is not None and web.read_only:
        fetch = dataclasses.replace(fetch, offered_read_only=True)
    replaced = {WebFetch.name: fetch, SkillTool.name: SkillTool(skills_dir).tool()}
    return ToolSet(replaced.get(tool.name, tool) for tool in BUILTIN_TOOLS)


def openai_tools(names: Iterable[str]) -> list[dict[str, Any]]:
    """The OpenAI function-calling entries (``tools`` of a chat request) of built-in ``names``, in
    :data:`TOOL_NAMES` order whatever the order of ``names`` (so a request's prefix stays stable). The entries are
    shared: do not mutate them. An unknown name raises ``ValueError``."""
    return BUILTIN.entries(names)
