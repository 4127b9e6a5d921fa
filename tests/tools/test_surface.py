"""The tools' contract: the exported surface, the eight tools and their schemas (pinned to schemas/tools), and
how bad arguments from the model are refused (with a message the model can act on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import acp_server.tools as tools
from acp_server.errors import ServerError
from acp_server.tools import READ_ONLY_TOOLS, TOOL_NAMES, ToolCallError, ToolError, openai_tools
from acp_server.tools.__main__ import main as write_schemas
from acp_server.tools._prepare import MAX_ARGUMENTS_BYTES
from acp_server.tools.builtin import BUILTIN, BUILTIN_TOOLS
from acp_server.tools.registry import schema_json

from ._support import prepare

pytestmark = pytest.mark.anyio

SPECS = {tool.name: tool for tool in BUILTIN_TOOLS}

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "tools"

CONTRACT = {
    "read_file": ({"path"}, {"offset", "limit"}, "read", False),
    "list_directory": ({"path"}, set(), "read", False),
    "glob": ({"pattern"}, set(), "search", False),
    "grep": ({"pattern"}, {"path", "include"}, "search", False),
    "write_file": ({"path", "content"}, set(), "edit", True),
    "edit_file": ({"path", "old_text", "new_text"}, {"replace_all"}, "edit", True),
    "run_command": ({"command"}, {"timeout_ms", "outside_sandbox", "reason"}, "execute", True),
    "web_fetch": ({"url"}, {"prompt"}, "fetch", True),
    "task": ({"description", "prompt"}, {"write"}, "think", False),
    "skill": ({"name"}, {"path"}, "read", False),
    "update_plan": ({"entries"}, set(), "think", False),
}


def test_exported_members() -> None:
    assert tools.__all__ == sorted(tools.__all__, key=lambda name: (not name.isupper(), name))
    assert set(tools.__all__) == {
        "CREDENTIAL_STORES",
        "SandboxPolicy",
        "SandboxSupport",
        "configure_sandbox",
        "sandbox_support",
        "MAX_ARGUMENTS_BYTES",
        "OUTPUT_LIMIT_BYTES",
        "PERMISSION_OPTIONS",
        "READ_ONLY_TOOLS",
        "SECRET_ENV",
        "TOOL_NAMES",
        "CheckpointRecorder",
        "ChildFace",
        "ContentSink",
        "EditorReader",
        "EditorTerminal",
        "EditorWriter",
        "PermissionAsker",
        "ProjectText",
        "read_project_text",
        "PermissionChoice",
        "PreparedCall",
        "Walk",
        "checkpoints_used",
        "current_recorder",
        "open_parent",
        "remove_file",
        "write_bytes_atomic",
        "Target",
        "TerminalExit",
        "TerminalOutput",
        "ToolCallError",
        "ToolClient",
        "ToolError",
        "ToolResult",
        "ToolSet",
        "WebPolicy",
        "Workspace",
        "arguments_json",
        "cap_text",
        "failure",
        "guarded_run",
        "openai_tools",
        "permission_choice",
        "prepare_call",
        "schema_check",
        "watched_group",
    }
    for name in tools.__all__:
        assert getattr(tools, name) is not None


def test_errors_derive_from_the_server_root() -> None:
    assert issubclass(ToolCallError, ToolError)
    assert issubclass(ToolError, ServerError)
    assert ToolCallError("x").error_kind == "tool_error"


SELF_DESCRIBED = frozenset({"path", "content", "command", "timeout_ms", "new_text", "replace_all", "entries"})
"""Parameters whose name and schema say what they are: no description spent on them (the fixed cost of a turn)."""


def test_the_eleven_tools_their_parameters_kinds_and_permission() -> None:
    assert tuple(CONTRACT) == TOOL_NAMES
    assert frozenset({"read_file", "list_directory", "glob", "grep", "task", "skill", "update_plan"}) == READ_ONLY_TOOLS
    for name, (required, optional, kind, permission) in CONTRACT.items():
        spec = SPECS[name]
        assert set(spec.parameters["required"]) == required, name
        assert set(spec.parameters["properties"]) == required | optional, name
        assert (spec.kind, spec.needs_permission) == (kind, permission), name
        assert spec.description, name
        for param, prop in spec.parameters["properties"].items():  # a name that says it all goes without words
            assert prop.get("description") or param in SELF_DESCRIBED, (name, param)


def test_openai_entries_in_canonical_order_whatever_the_order_asked() -> None:
    entries = openai_tools(["grep", "read_file"])
    assert [entry["function"]["name"] for entry in entries] == ["read_file", "grep"]
    assert entries[0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": SPECS["read_file"].description,
            "parameters": SPECS["read_file"].parameters,
        },
    }
    read_only = [entry["function"]["name"] for entry in openai_tools(READ_ONLY_TOOLS)]
    assert read_only == [*TOOL_NAMES[:4], "task", "skill", "update_plan"]
    assert len(openai_tools(TOOL_NAMES)) == 11
    assert [BUILTIN.kind(name) for name in (*TOOL_NAMES, "nope")] == [
        *["read"] * 2,
        *["search"] * 2,
        *["edit"] * 2,
        "execute",
        "fetch",
        "think",
        "read",
        "think",
        "other",
    ]
    with pytest.raises(ValueError, match="unknown tools: nope"):
        openai_tools(["nope"])


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_schema_files_are_what_the_code_sends(name: str) -> None:
    path = SCHEMAS / f"{name}.json"
    assert path.read_text() == schema_json(SPECS[name]), "regenerate with: python -m acp_server.tools"
    schema: dict[str, Any] = json.loads(path.read_text())
    assert schema == openai_tools([name])[0]["function"]["parameters"]
    # a plain object schema OpenAI takes: no references, no definitions, closed
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert "anyOf" not in json.dumps(schema) and "title" not in schema
    assert set(schema["required"]) <= set(schema["properties"])


def test_no_other_schema_file() -> None:
    assert sorted(path.stem for path in SCHEMAS.glob("*")) == sorted(TOOL_NAMES)


def test_the_generator_writes_the_pinned_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert write_schemas([str(tmp_path)]) == 0
    for name in TOOL_NAMES:
        assert (tmp_path / f"{name}.json").read_text() == (SCHEMAS / f"{name}.json").read_text()
    assert capsys.readouterr().out.count(".json") == 11


def test_the_schemas_and_the_models_agree_on_examples() -> None:
    """What the schema allows the model accepts, and the other way round, on the edge values."""
    cases: list[tuple[str, dict[str, Any], bool]] = [
        ("read_file", {"path": "a", "offset": 1, "limit": 5}, True),
        ("read_file", {"path": "a", "offset": 0}, False),
        ("read_file", {"path": "a", "extra": 1}, False),
        ("run_command", {"command": "ls", "timeout_ms": 600_000}, True),
        ("run_command", {"command": "ls", "timeout_ms": 600_001}, False),
        ("run_command", {"command": ""}, False),
        ("edit_file", {"path": "a", "old_text": "x", "new_text": "y", "replace_all": True}, True),
        ("grep", {"pattern": "x", "path": "src", "include": "*.py"}, True),
        ("glob", {}, False),
        ("update_plan", {"entries": []}, True),
        ("update_plan", {"entries": [{"content": "a", "status": "completed", "priority": "low"}]}, True),
        ("update_plan", {"entries": [{"content": "a", "status": "done"}]}, False),
        ("update_plan", {"entries": [{"content": "", "status": "pending"}]}, False),
        ("update_plan", {"entries": [{"content": "a" * 2001, "status": "pending"}]}, False),
        ("update_plan", {"entries": [{"content": "a", "status": "pending", "extra": 1}]}, False),
        ("update_plan", {"entries": [{"content": "a", "status": "pending"}] * 51}, False),
    ]
    for name, value, valid in cases:
        by_schema = jsonschema.Draft202012Validator(SPECS[name].parameters).is_valid(value)
        try:
            SPECS[name].args.model_validate(value)
            by_model = True
        except ValueError:
            by_model = False
        assert by_schema == by_model == valid, (name, value)


async def test_unknown_and_not_offered_tools_name_the_offered_ones(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "foo")
    assert str(caught.value) == (
        "unknown tool 'foo'; available: read_file, list_directory, glob, grep, write_file, edit_file, run_command, "
        "web_fetch, task, skill, update_plan"
    )
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "write_file", offered=READ_ONLY_TOOLS, path="a", content="")
    assert str(caught.value) == (
        "tool 'write_file' is not available in this session; available: read_file, list_directory, glob, grep, "
        "task, skill, update_plan"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "arguments are not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"path": "a", "offset": NaN}', "arguments are not valid JSON: NaN is not a JSON value"),
        ('{"path": "a", "limit": -Infinity}', "arguments are not valid JSON: -Infinity is not a JSON value"),
        ("[1, 2]", "arguments must be a JSON object, not an array; read_file takes: path, offset?, limit?"),
        ("null", "arguments must be a JSON object, not null"),
        ("{}", "arguments do not match the schema: path: Field required (read_file takes: path, offset?, limit?)"),
        ("", "arguments do not match the schema: path: Field required"),
        ('{"path": 3}', "arguments do not match the schema: path: Input should be a valid string"),
        ('{"path": "a", "offset": 0}', "offset: Input should be greater than or equal to 1"),
        ('{"path": "a", "lines": 3}', "arguments do not match the schema: unknown parameter 'lines'"),
    ],
)
async def test_bad_arguments_are_refused_precisely(tmp_path: Path, arguments: str, message: str) -> None:
    with pytest.raises(ToolCallError) as caught:
        await tools.prepare_call("read_file", arguments, cwd=str(tmp_path), client=None, offered=TOOL_NAMES)
    assert message in str(caught.value)


async def test_huge_arguments_are_refused_before_parsing(tmp_path: Path) -> None:
    huge = json.dumps({"path": "big.txt", "content": "é" * (MAX_ARGUMENTS_BYTES // 2)}, ensure_ascii=False)
    assert len(huge) < MAX_ARGUMENTS_BYTES  # the limit is in bytes, not characters
    with pytest.raises(ToolCallError, match=r"arguments are too large \(\d+ bytes; at most 1048576 bytes\)"):
        await tools.prepare_call("write_file", huge, cwd=str(tmp_path), client=None, offered=TOOL_NAMES)
    assert not (tmp_path / "big.txt").exists()


async def test_null_for_an_optional_parameter_is_its_default(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    prepared = await tools.prepare_call(
        "read_file", '{"path": "a.txt", "offset": null, "limit": null}', cwd=str(tmp_path), client=None,
        offered=TOOL_NAMES,
    )
    assert prepared.title == "Read a.txt"


async def test_a_refusal_quoting_a_huge_argument_is_cut(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError) as caught:
        await prepare(tmp_path, "glob", pattern="/elsewhere/" + "x" * 100_000)
    message = str(caught.value)
    assert message.startswith("pattern '/elsewhere/xxxx")
    assert len(message) <= 8 * 1024 and message.endswith("[output truncated at 8 KiB: the message was cut]")
