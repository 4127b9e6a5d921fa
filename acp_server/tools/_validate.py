"""A tool call's arguments, from the model's raw JSON to validated values, or a :class:`ToolCallError` for the model.

The arguments are at most 1 MiB, JSON, an object, their strings valid Unicode (no lone surrogate), and match the
tool's schema: through its pydantic model when it has one (the built-in tools: the one validator of their
arguments), else against its JSON Schema (an MCP server's tools come with a schema only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import BaseModel, ValidationError

from ._exceptions import ToolCallError
from ._workspace import check_unicode

if TYPE_CHECKING:  # imported by the first schema_check: only an MCP server's tools have a JSON Schema to check
    from jsonschema.exceptions import ValidationError as SchemaViolation

__all__ = ["MAX_ARGUMENTS_BYTES", "SchemaCheck", "arguments_json", "parse_arguments", "schema_check"]

MAX_ARGUMENTS_BYTES = 1024 * 1024


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON value")


def arguments_json(text: str) -> Any:
    """A call's arguments parsed as JSON proper: ``NaN`` and ``Infinity``, which Python's parser takes, raise
    :class:`ValueError` like any other text that is not JSON (no face could send them on as valid JSON)."""
    return json.loads(text, parse_constant=_not_json)


_MAX_ISSUES = 5

SchemaCheck: TypeAlias = Callable[[dict[str, Any]], list[str]]
"""The problems of an arguments object against a tool's JSON Schema (none: it matches)."""

_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


_BOUNDS = {
    "maxLength": ("is {size} characters long", "at most"),
    "minLength": ("is {size} characters long", "at least"),
    "maxItems": ("has {size} items", "at most"),
    "minItems": ("has {size} items", "at least"),
}


def _bound_message(error: SchemaViolation) -> str | None:
    """A value over (or under) a length or count bound, said with both numbers (a long value is never quoted, and
    the model may not have been sent the bound: see ``acp_server.grammar_bounds``); None for other errors."""
    bound = _BOUNDS.get(str(error.validator))
    if bound is None or not isinstance(error.instance, str | list):
        return None
    what, side = bound
    return f"{what.format(size=len(error.instance))}; {side} {error.validator_value} allowed"


def schema_check(schema: Mapping[str, Any]) -> SchemaCheck:
    """The check of ``schema`` (its draft from ``$schema``, 2020-12 by default). Raises ``ValueError`` when the
    schema itself is invalid."""
    import jsonschema
    from jsonschema.exceptions import SchemaError

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except SchemaError as exc:
        raise ValueError(f"invalid JSON Schema: {exc.message}") from None
    validator = cls(schema)

    def check(value: dict[str, Any]) -> list[str]:
        problems: list[str] = []
        for error in validator.iter_errors(value):
            where = ".".join(str(part) for part in error.absolute_path) or "arguments"
            problems.append(f"{where}: {_bound_message(error) or error.message[:500]}")
            if len(problems) >= _MAX_ISSUES:
                break
        return problems

    return check


def _signature(parameters: Mapping[str, Any]) -> str:
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping):
        return "an object"
    required = parameters.get("required")
    required = set(required) if isinstance(required, list) else set()
    return ", ".join(key if key in required else f"{key}?" for key in properties) or "no parameters"


def _issues(error: ValidationError) -> str:
    issues: list[str] = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        if item["type"] == "extra_forbidden":
            issues.append(f"unknown parameter '{where}'")
        else:
            issues.append(f"{where}: {item['msg']}")
    return "; ".join(issues)


def _first_issue(error: ValidationError) -> str:
    """The main problem of ``error`` in a few words for a title: ``unknown argument paht``, ``missing path``,
    ``bad argument limit``."""
    order = {"extra_forbidden": 0, "missing": 1}  # a misspelt name is both: its spelling says more
    item = min(error.errors(include_url=False), key=lambda issue: order.get(issue["type"], 2))
    where = (".".join(str(part) for part in item["loc"]) or "arguments")[:40]
    if item["type"] == "extra_forbidden":
        return f"unknown argument {where}"
    if item["type"] == "missing":
        return f"missing {where}"
    return f"bad argument {where}"


def _check_strings(value: object, where: str, depth: int = 0) -> None:
    """Every string in ``value`` (keys included) is valid Unicode; nesting past 64 levels is refused."""
    if depth > 64:
        raise ToolCallError("arguments are nested too deeply")
    if isinstance(value, str):
        check_unicode(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_unicode(key, "a parameter name")
            _check_strings(item, key, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item, where, depth + 1)


def parse_arguments(
    name: str,
    arguments: str,
    parameters: Mapping[str, Any],
    args: type[BaseModel] | None,
    check: SchemaCheck | None = None,
) -> Any:
    """The validated arguments of tool ``name`` from the model's raw JSON ``arguments``: an ``args`` instance, or
    (no model) the JSON object, checked by ``check`` when given."""
    size = len(arguments) if arguments.isascii() else len(arguments.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENTS_BYTES:
        raise ToolCallError(
            f"arguments are too large ({size} bytes; at most {MAX_ARGUMENTS_BYTES} bytes)", what="arguments too large"
        )
    if not arguments.strip():
        value: object = {}  # some models send "" for "no arguments"
    else:
        try:
            value = arguments_json(arguments)
        except (ValueError, RecursionError) as exc:
            raise ToolCallError(f"arguments are not valid JSON: {exc}", what="arguments not JSON") from None
    if not isinstance(value, dict):
        kind = "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)
        raise ToolCallError(
            f"arguments must be a JSON object, not {kind}; {name} takes: {_signature(parameters)}",
            what="arguments not an object",
        )
    _check_strings(value, "arguments")
    if args is not None:
        try:
            return args.model_validate(value)
        except ValidationError as exc:
            raise ToolCallError(
                f"arguments do not match the schema: {_issues(exc)} ({name} takes: {_signature(parameters)})",
                what=_first_issue(exc),
            ) from None
    problems = check(value) if check is not None else []
    if problems:
        raise ToolCallError(
            f"arguments do not match the schema: {'; '.join(problems)} ({name} takes: {_signature(parameters)})",
            what=f"bad argument {problems[0].split(':', 1)[0][:40]}",
        )
    return value
