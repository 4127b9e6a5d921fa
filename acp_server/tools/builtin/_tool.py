"""What every built-in tool is: one :class:`BuiltinTool` subclass in a module of its own, holding its name, ACP
kind, title, description, arguments model (an :class:`Args` subclass) and ``prepare``.

The names and parameters are a contract (the model, the tests and users' prompts rely on them): they never change
silently. A tool's arguments model (pydantic, ``extra="forbid"``) is the one validator of its arguments; its JSON
Schema, cleaned to a plain object schema OpenAI accepts (no ``$defs``, no titles, optional fields as their plain
type, ``additionalProperties: false``), is what the model is sent and what ``schemas/tools/<name>.json`` holds.
Whether a tool is read-only (offered in ``read-only`` mode, never asks) follows from its kind alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from ...domain import ToolContent, ToolKind, ToolLocation
from .._call import Run, _guarded
from .._exec_config import guard_exec_config
from .._types import PreparedCall, ToolClient
from .._workspace import Workspace
from ..registry import Tool

__all__ = ["READ_ONLY_KINDS", "Args", "BuiltinTool", "clean_schema"]

READ_ONLY_KINDS: frozenset[ToolKind] = frozenset({"read", "search", "think"})
"""The kinds of tools that change nothing: read-only, offered in ``read-only`` mode, never asking."""


class Args(BaseModel):
    """A built-in tool's arguments: closed (an unknown argument is refused) and frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


A = TypeVar("A", bound=Args)


def clean_schema(schema: dict[str, Any], defs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A pydantic model's JSON Schema as a plain object schema: no titles, ``X | None`` as ``X``, no null default,
    nested models inlined (no ``$defs``/``$ref``, each closed), keys in a readable order."""
    defs = schema.get("$defs", {}) if defs is None else defs
    properties: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        prop.pop("title", None)
        options = prop.pop("anyOf", None)
        if options is not None:
            (kept,) = [option for option in options if option.get("type") != "null"]
            prop = {**kept, **prop}
        if "default" in prop and prop["default"] is None:
            del prop["default"]
        items = prop.get("items")
        if isinstance(items, dict) and "$ref" in items:
            prop["items"] = clean_schema(defs[items["$ref"].rsplit("/", 1)[-1]], defs)
        order = ("type", "description", "minimum", "maximum", "minLength", "default")
        properties[name] = {key: prop[key] for key in order if key in prop} | {
            key: value for key, value in prop.items() if key not in order
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(schema.get("required", [])),
        "additionalProperties": False,
    }


class BuiltinTool(ABC, Generic[A]):
    """One built-in tool. A subclass sets the class attributes and implements :meth:`prepare`, which validates
    what the arguments model cannot, confines paths and returns :meth:`call`'s :class:`PreparedCall`.

    ``title`` is what a call is shown as before its arguments are known (its verb: Read, List, ...); an ``edit``
    tool's calls that write a file making the user's tools run code are announced as commands."""

    name: ClassVar[str]
    kind: ClassVar[ToolKind]
    title: ClassVar[str]
    description: ClassVar[str]
    args: type[A]

    @property
    def read_only(self) -> bool:
        """It changes nothing (its kind is one of :data:`READ_ONLY_KINDS`)."""
        return self.kind in READ_ONLY_KINDS

    @abstractmethod
    async def prepare(self, args: A, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        """The call with the validated ``args`` in ``workspace``; raises :class:`ToolCallError` when it cannot be
        made."""

    def call(
        self,
        *,
        title: str,
        run: Run,
        locations: tuple[ToolLocation, ...] = (),
        preview: tuple[ToolContent, ...] = (),
    ) -> PreparedCall:
        """This tool's :class:`PreparedCall` (its kind and permission from the tool), ``run`` guarded."""
        return PreparedCall(
            name=self.name,
            title=title,
            kind=self.kind,
            locations=locations,
            preview=preview,
            needs_permission=not self.read_only,
            run=_guarded(run),
        )

    async def _prepare_guarded(self, args: A, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        return guard_exec_config(await self.prepare(args, workspace, client), workspace)

    def tool(self) -> Tool:
        """The registry's :class:`Tool` for this tool."""
        return Tool(
            name=self.name,
            description=self.description,
            parameters=clean_schema(self.args.model_json_schema()),
            kind=self.kind,
            read_only=self.read_only,
            prepare=self._prepare_guarded if self.kind == "edit" else self.prepare,
            args=self.args,
            title=self.title,
        )
