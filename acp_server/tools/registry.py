"""The tool registry: one :class:`Tool` value per tool, and the per-session :class:`ToolSet` the turn offers.

A :class:`Tool` is everything about one tool in one place: what the model is told (name, description, JSON Schema
of its arguments), its nature (ACP kind, read-only, needs permission) and how a call is prepared. A
:class:`ToolSet` is the tools of one session: the built-in ones, then those of other sources (an MCP server's
tools, keyed by the server), replaced whole when a source re-lists. Its offer rule applies the
mode's (:meth:`acp_server.modes.Mode.offers`): every tool, or (``read-only``, and an unknown mode: fail safe) the
read-only tools only.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..domain import ToolKind
from ..grammar_bounds import grammar_safe
from ..modes import mode_named
from ._exceptions import ToolCallError
from ._output import cap_text, utf8_len
from ._types import PreparedCall, ToolClient
from ._validate import SchemaCheck, parse_arguments
from ._workspace import Workspace, check_unicode

__all__ = ["Preparer", "Tool", "ToolSet"]

Preparer = Callable[[Any, Workspace, ToolClient | None], Awaitable[PreparedCall]]
"""How a call is prepared from its validated arguments (the ``args`` model's instance, or the JSON object when the
tool has no model), in the session's workspace, with the client (None: none)."""

_MAX_MESSAGE = 8 * 1024  # a refusal quotes what the model sent: never all of a huge argument


@dataclass(frozen=True, slots=True, eq=False)
class Tool:
    """One tool. ``parameters`` is the JSON Schema of its arguments, which are validated by ``args`` (a pydantic
    model) when it has one, else by ``check`` (``parameters`` compiled by ``schema_check``); the model is sent
    ``parameters`` without any bound a grammar-constrained server refuses (:func:`~acp_server.grammar_bounds.
    grammar_safe`: for built-in and MCP tools alike), in ``entry``.
    ``read_only``: it changes nothing (offered in ``read-only`` mode, never asks); else it needs permission: the
    mode decides whether a call waits for the user.
    ``source``: where it comes from (None: built in; else the MCP server).
    ``title``: what a call is shown as before its arguments are known (None: its name).
    ``offered_read_only``: offered in ``read-only`` mode although it needs permission (``web_fetch`` where the
    server lets read-only sessions reach the network). ``instructions``: what the tool adds to the system prompt
    of a session in a directory ('' for nothing; ``skill``: the skills' list); called in a worker thread.
    ``needs_instructions``: offered only while its ``instructions`` for the session's directory say something
    (``skill``: only to a session that has skills)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    kind: ToolKind
    read_only: bool
    prepare: Preparer
    args: type[BaseModel] | None = None
    check: SchemaCheck | None = None
    source: str | None = None
    title: str | None = None
    offered_read_only: bool = False
    instructions: Callable[[str], str] | None = None
    needs_instructions: bool = False
    entry: dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        function = {"name": self.name, "description": self.description, "parameters": grammar_safe(self.parameters)}
        object.__setattr__(self, "entry", {"type": "function", "function": function})

    @property
    def needs_permission(self) -> bool:
        """A call may wait for the user (the mode decides): it changes something."""
        return not self.read_only


class ToolSet:
    """The tools of one session, in offer order: built-ins first, then each source's tools in the order it listed
    them. Names are unique (a source's tool whose name is taken is left out). Changing a source's tools applies to
    the next model request; the OpenAI entries of an offer are built once per change of the set."""

    __slots__ = ("_builtin", "_cache", "_sources", "_tools", "_withheld", "before_prompt")

    def __init__(self, builtin: Iterable[Tool]) -> None:
        self.before_prompt: Callable[[], Awaitable[tuple[tuple[str, str], ...]]] | None = None
        """Called by the turn once per prompt, before its first request (its MCP servers reconnect the dead); it
        returns the sources newly down after that, each with why (the user is told once per fall)."""
        self._builtin: tuple[Tool, ...] = tuple(builtin)
        self._sources: dict[str, tuple[Tool, ...]] = {}
        self._tools: dict[str, Tool] = {}
        self._cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self._withheld: frozenset[str] = frozenset()
        """The tools :meth:`instructions` last found with nothing to say that need to (not offered meanwhile)."""
        self._rebuild()

    def _rebuild(self) -> None:
        tools: dict[str, Tool] = {}
        for tool in (*self._builtin, *(tool for listed in self._sources.values() for tool in listed)):
            tools.setdefault(tool.name, tool)
        self._tools = tools
        self._cache = {}

    async def prepare_prompt(self) -> tuple[tuple[str, str], ...]:
        """What the set does once per prompt before the model is asked (see :attr:`before_prompt`): the sources
        newly down, with why."""
        if self.before_prompt is not None:
            return await self.before_prompt()
        return ()

    def copy(self) -> ToolSet:
        """A set with the same built-ins and no other source (what a new session starts from)."""
        return ToolSet(self._builtin)

    def without(self, name: str) -> ToolSet:
        """A set of the same tools as now but ``name`` (a child session's: no ``task`` of its own)."""
        tools = ToolSet(tool for tool in self._builtin if tool.name != name)
        for source, listed in self._sources.items():
            tools.set_source(source, (tool for tool in listed if tool.name != name))
        return tools

    def set_source(self, source: str, tools: Iterable[Tool]) -> None:
        """``source``'s tools are now ``tools`` (replacing what it listed before)."""
        self._sources[source] = tuple(tools)
        self._rebuild()

    def drop_source(self, source: str) -> None:
        """``source``'s tools are gone (its server stopped or closed)."""
        if self._sources.pop(source, None) is not None:
            self._rebuild()

    def instructions(self, cwd: str) -> str:
        """What the tools add to the system prompt of a session in ``cwd`` (blocking: call in a worker thread); a
        tool that ``needs_instructions`` and has none for ``cwd`` is not offered until a later call finds some."""
        texts = {name: tool.instructions(cwd) for name, tool in self._tools.items() if tool.instructions is not None}
        self._withheld = frozenset(
            name for name, text in texts.items() if not text and self._tools[name].needs_instructions
        )
        return "\n\n".join(text for text in texts.values() if text)

    @property
    def names(self) -> tuple[str, ...]:
        """Every tool's name, in offer order."""
        return tuple(self._tools)

    def names_except(self, source: str) -> list[str]:
        """The names of every tool that does not come from ``source``."""
        return [name for name, tool in self._tools.items() if tool.source != source]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def kind(self, name: str) -> ToolKind:
        """The ACP kind of tool ``name``; ``other`` for a name that is no tool of this set."""
        tool = self._tools.get(name)
        return tool.kind if tool is not None else "other"

    def offered(self, mode: str) -> tuple[str, ...]:
        """The tools the model is offered in ``mode``: all in a known mode but ``read-only``; the read-only ones in
        ``read-only`` and in an unknown mode (fail safe); never one withheld for want of instructions."""
        offers, withheld = mode_named(mode).offers, self._withheld
        return tuple(
            name
            for name, tool in self._tools.items()
            if offers(tool.read_only or tool.offered_read_only) and name not in withheld
        )

    def still_offered(self, offered: tuple[str, ...], mode: str) -> tuple[str, ...]:
        """The tools a call may use: offered in its request and still offered in the session's mode now (a switch
        to ``read-only`` while a call waits refuses the step's remaining edits and commands, "always" rules
        included)."""
        now = self.offered(mode)
        return offered if now == offered else tuple(name for name in offered if name in now)

    def entries(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """The OpenAI function-calling entries (``tools`` of a chat request) of ``names``, in offer order whatever
        the order of ``names`` (a request's prefix stays stable). Shared: do not mutate them. An unknown name
        raises ``ValueError``."""
        key = tuple(names)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        wanted = set(key)
        unknown = wanted - self._tools.keys()
        if unknown:
            raise ValueError(f"unknown tools: {', '.join(sorted(unknown))}")
        entries = [tool.entry for name, tool in self._tools.items() if name in wanted]
        if len(self._cache) >= 16:
            self._cache.clear()
        self._cache[key] = entries
        return entries

    def tools_entries(self, mode: str) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` entries of what ``mode`` offers."""
        return self.entries(self.offered(mode))

    async def prepare(
        self,
        name: str,
        arguments: str,
        *,
        cwd: str,
        client: ToolClient | None,
        offered: Collection[str],
        additional: Sequence[str] = (),
        sandboxed: bool = False,
    ) -> PreparedCall:
        """The call of tool ``name`` with the model's raw JSON ``arguments``, in the project directory ``cwd`` (with the
        session's ``additional`` directories as further roots), validated, confined and announced; the client (None:
        none) reads, writes and runs when it can. Raises :class:`ToolCallError` (the model's message) when the call
        cannot be made; cancellation propagates."""
        tool = self._tools.get(name)
        if name not in offered or tool is None:
            available = ", ".join(known for known in self._tools if known in offered) or "none"
            if tool is not None:
                raise ToolCallError(
                    f"tool '{name}' is not available in this session; available: {available}",
                    what="not offered in this mode",
                )
            raise ToolCallError(f"unknown tool '{name}'; available: {available}")
        try:
            args = parse_arguments(name, arguments, tool.parameters, tool.args, tool.check)
            check_unicode(cwd, "the project directory")
            return await tool.prepare(args, Workspace(cwd, additional, sandboxed=sandboxed), client)
        except ToolCallError as exc:
            message = str(exc)
            if len(message) > _MAX_MESSAGE // 4 and utf8_len(message) > _MAX_MESSAGE:
                cut = cap_text(message, "the message was cut", _MAX_MESSAGE)
                raise ToolCallError(cut, what=exc.what, subject=exc.subject) from None
            raise


def schema_json(tool: Tool) -> str:
    """The parameters schema a tool's model is sent, as ``schemas/tools/<name>.json`` holds it: indented,
    newline-ended."""
    return json.dumps(tool.entry["function"]["parameters"], indent=2, ensure_ascii=False) + "\n"
