"""The eight tools as the model sees them: names, descriptions, argument models and their JSON Schemas.

This is a contract (the model, the tests and users' prompts rely on it): the names and parameters never change
silently. Each tool's argument model (pydantic, ``extra="forbid"``) is the one validator of its arguments; its
JSON Schema, cleaned to a plain object schema OpenAI accepts (no ``$defs``, no titles, optional fields as their
plain type, ``additionalProperties: false``), is what the model is sent and what ``schemas/tools/<name>.json``
holds. Everything here is built once, at import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..domain import ToolKind

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT_MS",
    "MAX_COMMAND_TIMEOUT_MS",
    "SPECS",
    "EditFileArgs",
    "GlobArgs",
    "GrepArgs",
    "ListDirectoryArgs",
    "PlanEntryArgs",
    "ReadFileArgs",
    "RunCommandArgs",
    "ToolSpec",
    "UpdatePlanArgs",
    "WriteFileArgs",
    "schema_text",
]

DEFAULT_COMMAND_TIMEOUT_MS = 120_000
MAX_COMMAND_TIMEOUT_MS = 600_000
MAX_PLAN_ENTRIES = 50
MAX_PLAN_ENTRY_CHARS = 2_000

_PATH = "Relative to the project directory, or absolute inside it."


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReadFileArgs(_Args):
    path: str = Field(description=f"The file to read. {_PATH}")
    offset: int | None = Field(
        default=None, ge=1, description="The 1-based line to start reading at (default: the first line)."
    )
    limit: int | None = Field(
        default=None, ge=1, description="How many lines to read at most (default: up to the output cap)."
    )


class ListDirectoryArgs(_Args):
    path: str = Field(description=f"The directory to list; '.' is the project directory. {_PATH}")


class GlobArgs(_Args):
    pattern: str = Field(
        min_length=1,
        description=(
            "A glob relative to the project directory, e.g. 'src/**/*.py'. '*' and '?' do not cross '/', "
            "'**' matches any number of directories (use '**/' to search at any depth), '[abc]' a character "
            "class, '{py,pyi}' alternatives."
        ),
    )


class GrepArgs(_Args):
    pattern: str = Field(
        min_length=1,
        description=(
            "A Python regular expression (re syntax), matched against each line; use '(?i)' for a "
            "case-insensitive search."
        ),
    )
    path: str | None = Field(
        default=None, description=f"A file or directory to search (default: the whole project). {_PATH}"
    )
    include: str | None = Field(
        default=None,
        description=(
            "Only search files matching this glob: on the file name (e.g. '*.py', '*.{ts,tsx}'), or on the path "
            "relative to the project directory when it contains '/' (e.g. 'src/**/*.py')."
        ),
    )


class WriteFileArgs(_Args):
    path: str = Field(description=f"The file to create or overwrite; missing parent directories are created. {_PATH}")
    content: str = Field(description="The complete new content of the file.")


class EditFileArgs(_Args):
    path: str = Field(description=f"The file to edit. {_PATH}")
    old_text: str = Field(
        description=(
            "The exact text to replace, as it is in the file (whitespace and indentation included, without the "
            "line numbers read_file shows). It must occur exactly once unless replace_all is set: include enough "
            "surrounding lines to make it unique."
        )
    )
    new_text: str = Field(description="The text that replaces old_text.")
    replace_all: bool | None = Field(
        default=False, description="Replace every occurrence of old_text (default: false)."
    )


class RunCommandArgs(_Args):
    command: str = Field(
        min_length=1,
        description=(
            "A shell command line, run with /bin/sh in the project directory, without input (stdin is empty)."
        ),
    )
    timeout_ms: int | None = Field(
        default=DEFAULT_COMMAND_TIMEOUT_MS,
        ge=1,
        le=MAX_COMMAND_TIMEOUT_MS,
        description=(
            f"Kill the command after this many milliseconds (default {DEFAULT_COMMAND_TIMEOUT_MS}, "
            f"at most {MAX_COMMAND_TIMEOUT_MS})."
        ),
    )


class PlanEntryArgs(_Args):
    content: str = Field(
        min_length=1,
        max_length=MAX_PLAN_ENTRY_CHARS,
        description="What this step does, in a short imperative sentence.",
    )
    status: Literal["pending", "in_progress", "completed"] = Field(
        description="pending (not started), in_progress (the step being worked on now) or completed."
    )
    priority: Literal["high", "medium", "low"] = Field(
        default="medium", description="How much the step matters: high, medium or low (default: medium)."
    )


class UpdatePlanArgs(_Args):
    """The whole plan, every time (it replaces the previous one); at most one entry is ``in_progress``."""

    entries: tuple[PlanEntryArgs, ...] = Field(
        max_length=MAX_PLAN_ENTRIES,
        description=(
            f"Every step of the plan, in order (at most {MAX_PLAN_ENTRIES}); this list replaces the previous plan. "
            "At most one step may be in_progress. An empty list clears the plan."
        ),
    )

    @field_validator("entries")
    @classmethod
    def _one_in_progress(cls, entries: tuple[PlanEntryArgs, ...]) -> tuple[PlanEntryArgs, ...]:
        working = [str(n) for n, entry in enumerate(entries) if entry.status == "in_progress"]
        if len(working) > 1:
            raise ValueError(f"at most one entry may be in_progress; entries {', '.join(working)} are")
        return entries


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One built-in tool's spec: what the model is told (``description``, ``parameters``), how its arguments are
    validated (``args``), and its nature (ACP ``kind``; ``needs_permission``: it changes the project or runs code;
    the others change nothing: read-only). ``title``: what a call is shown as before its arguments are known (None:
    the verb of its name). :mod:`acp_server.tools.builtin` makes each a registry ``Tool``."""

    name: str
    description: str
    args: type[_Args]
    kind: ToolKind
    needs_permission: bool
    parameters: Mapping[str, Any]
    title: str | None = None


def _clean(schema: dict[str, Any], defs: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
            prop["items"] = _clean(defs[items["$ref"].rsplit("/", 1)[-1]], defs)
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


def _spec(
    name: str, args: type[_Args], kind: ToolKind, needs_permission: bool, description: str, title: str | None = None
) -> ToolSpec:
    return ToolSpec(name, description, args, kind, needs_permission, _clean(args.model_json_schema()), title)


_SPECS: tuple[ToolSpec, ...] = (
    _spec(
        "read_file",
        ReadFileArgs,
        "read",
        False,
        "Read a text file of the project. Each line is shown prefixed with its line number and a tab (the prefix "
        "is not part of the file). Output is capped at 64 KiB: read long files in parts with offset and limit. "
        "Binary files are refused.",
    ),
    _spec(
        "list_directory",
        ListDirectoryArgs,
        "read",
        False,
        "List a directory of the project: one entry per line, sorted, directories with a trailing '/', symbolic "
        "links as 'name -> target'. Entries hidden by .gitignore and the .git directory are left out.",
    ),
    _spec(
        "glob",
        GlobArgs,
        "search",
        False,
        "Find files and directories of the project whose path matches a glob; prints their paths relative to the "
        "project directory, sorted (directories with a trailing '/'). Skips what .gitignore hides and .git; "
        "at most 1000 paths.",
    ),
    _spec(
        "grep",
        GrepArgs,
        "search",
        False,
        "Search the project's text files for lines matching a regular expression; prints 'path:line:text' for "
        "each matching line (paths relative to the project directory). Skips binary files, files over 10 MiB, "
        "what .gitignore hides and .git; at most 500 matching lines.",
    ),
    _spec(
        "write_file",
        WriteFileArgs,
        "edit",
        True,
        "Create a file, or replace the whole content of an existing one. Prefer edit_file to change part of an "
        "existing file. The user may be asked to approve the change.",
    ),
    _spec(
        "edit_file",
        EditFileArgs,
        "edit",
        True,
        "Replace text in an existing file: old_text must occur exactly once (or set replace_all). Read the file "
        "first and copy old_text exactly. The user may be asked to approve the change.",
    ),
    _spec(
        "run_command",
        RunCommandArgs,
        "execute",
        True,
        "Run a shell command in the project directory (non-interactive: no input) and return its exit code and "
        "its output (stdout and stderr together; capped at 64 KiB, keeping the beginning and the end). Processes "
        "it leaves in the background are killed when it ends. The user may be asked to approve it.",
    ),
    _spec(
        "update_plan",
        UpdatePlanArgs,
        "think",
        False,
        "Keep a visible plan for multi-step work: send the whole list of steps each time (it replaces the previous "
        "plan), with exactly one step in_progress while you work, and update it as each step is completed. Skip it "
        "for a simple one-step request. Changes nothing in the project; the user is never asked.",
        "Update plan",
    ),
)

SPECS: Mapping[str, ToolSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""Every built-in tool by name, in offer order."""


def schema_text(name: str) -> str:
    """The content of ``schemas/tools/<name>.json``: the tool's parameters schema, indented, newline-ended."""
    return json.dumps(SPECS[name].parameters, indent=2, ensure_ascii=False) + "\n"
