"""The entry point of a tool call: from the model's name and raw JSON arguments to a :class:`PreparedCall`.

Everything that can be checked before the user is shown or asked anything is checked here, and fails with a
:class:`ToolCallError` whose message the model gets: the tool is known and offered; the arguments are at most
1 MiB, JSON, an object, and match the tool's schema, their strings valid Unicode (no lone surrogate); the paths
are confined; an edit applies. Arguments are validated by the tool's pydantic model only (no second validation
against the JSON Schema).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from pydantic import BaseModel, ValidationError

from ._command import prepare_run_command
from ._exceptions import ToolCallError
from ._exec_config import guard_exec_config
from ._files import prepare_edit_file, prepare_list_directory, prepare_read_file, prepare_write_file
from ._output import cap_text, utf8_len
from ._search import prepare_glob, prepare_grep
from ._specs import SPECS, TOOL_NAMES
from ._types import PreparedCall, ToolClient
from ._workspace import Workspace, check_unicode

__all__ = ["MAX_ARGUMENTS_BYTES", "parse_arguments", "prepare_call"]

MAX_ARGUMENTS_BYTES = 1024 * 1024
_MAX_MESSAGE = 8 * 1024  # a refusal quotes what the model sent: never all of a huge argument

_Preparer = Callable[[Any, Workspace, ToolClient | None], Awaitable[PreparedCall]]
_PREPARERS: dict[str, _Preparer] = {
    "read_file": prepare_read_file,
    "list_directory": prepare_list_directory,
    "glob": prepare_glob,
    "grep": prepare_grep,
    "write_file": prepare_write_file,
    "edit_file": prepare_edit_file,
    "run_command": prepare_run_command,
}
assert tuple(_PREPARERS) == TOOL_NAMES

_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _signature(name: str) -> str:
    parameters = SPECS[name].parameters
    required = set(parameters["required"])
    return ", ".join(key if key in required else f"{key}?" for key in parameters["properties"])


def _issues(error: ValidationError) -> str:
    issues: list[str] = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        if item["type"] == "extra_forbidden":
            issues.append(f"unknown parameter '{where}'")
        else:
            issues.append(f"{where}: {item['msg']}")
    return "; ".join(issues)


def parse_arguments(name: str, arguments: str) -> BaseModel:
    """The validated arguments of tool ``name`` (a known tool) from the model's raw JSON ``arguments``."""
    size = len(arguments) if arguments.isascii() else len(arguments.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENTS_BYTES:
        raise ToolCallError(f"arguments are too large ({size} bytes; at most {MAX_ARGUMENTS_BYTES} bytes)")
    if not arguments.strip():
        value: object = {}  # some models send "" for "no arguments"
    else:
        try:
            value = json.loads(arguments)
        except ValueError as exc:
            raise ToolCallError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        kind = "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)
        raise ToolCallError(f"arguments must be a JSON object, not {kind}; {name} takes: {_signature(name)}")
    for key, item in value.items():
        check_unicode(key, "a parameter name")
        if isinstance(item, str):
            check_unicode(item, key)
    try:
        return SPECS[name].args.model_validate(value)
    except ValidationError as exc:
        raise ToolCallError(
            f"arguments do not match the schema: {_issues(exc)} ({name} takes: {_signature(name)})"
        ) from None


async def prepare_call(
    name: str,
    arguments: str,
    *,
    cwd: str,
    client: ToolClient | None,
    offered: Collection[str],
) -> PreparedCall:
    """The call of tool ``name`` with the model's raw JSON ``arguments``, in the project directory ``cwd``,
    validated, confined and announced; the client (None: none) reads, writes and runs when it can. Raises
    :class:`ToolCallError` (the model's message) when the call cannot be made; cancellation propagates."""
    if name not in offered or name not in _PREPARERS:
        available = ", ".join(tool for tool in TOOL_NAMES if tool in offered) or "none"
        if name in _PREPARERS:
            raise ToolCallError(f"tool '{name}' is not available in this session; available: {available}")
        raise ToolCallError(f"unknown tool '{name}'; available: {available}")
    try:
        args = parse_arguments(name, arguments)
        check_unicode(cwd, "the project directory")
        workspace = Workspace(cwd)
        return guard_exec_config(await _PREPARERS[name](args, workspace, client), workspace)  # runs code: asks
    except ToolCallError as exc:
        message = str(exc)
        if len(message) > _MAX_MESSAGE // 4 and utf8_len(message) > _MAX_MESSAGE:
            raise ToolCallError(cap_text(message, "the message was cut", _MAX_MESSAGE)) from None
        raise
