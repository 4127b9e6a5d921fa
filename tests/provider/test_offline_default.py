"""The offline model's unscripted answer, as pure functions: the path a prompt names, what a read_file result says,
and the behaviour chosen for a request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_server.provider.offline import Answer, ScriptedCall, ToolCalls
from acp_server.provider.offline._default import answer_from_reads, default_behaviour, path_in_prompt
from acp_server.provider.offline._read_output import FileLines, ReadFailure, parse_read_output

READ_FILE_TOOL = {
    "type": "function",
    "function": {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}},
}
GLOB_TOOL = {"type": "function", "function": {"name": "glob", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("prompt", "path"),
    [
        ("what is in README.md?", "README.md"),
        ("why does `tests/test_x.py` fail?", "tests/test_x.py"),
        ('look at "src/app.py", please', "src/app.py"),
        ("(see docs/guide.rst).", "docs/guide.rst"),
        ("**pyproject.toml**: what does it pin?", "pyproject.toml"),
        ("the bug is at src/app.py:42:7", "src/app.py"),
        ("what about ./setup.cfg", "./setup.cfg"),
        ("does .gitignore hide build/?", ".gitignore"),
        ("compare src/ with notes.txt", "notes.txt"),  # a dot-extension wins over a mere slash
        ("what is in src/ today", "src/"),
        ("open __init__.py", "__init__.py"),
        ("README.md and CHANGES.md", "README.md"),  # the first one
    ],
)
def test_a_relative_file_path_is_found_and_stripped(prompt: str, path: str) -> None:
    assert path_in_prompt(prompt) == path


@pytest.mark.parametrize(
    "prompt",
    [
        "hello there",
        "see https://example.com/index.html",
        "visit www.example.com",
        "read /etc/passwd",
        "read ~/notes.txt",
        "pi is 3.14 and the version v1.2.3",
        "this is it, e.g. that one.",
        "what is glob src/*.py",
        "...",
        "",
    ],
)
def test_no_path_where_there_is_none_or_it_is_not_relative(prompt: str) -> None:
    assert path_in_prompt(prompt) is None


CAT_N = "     1\t# acp-server\n     2\t\n     3\tAn ACP agent.\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (CAT_N, FileLines("# acp-server", 3)),
        ("# acp-server\n\nAn ACP agent.\n", FileLines("# acp-server", 3)),
        ("# acp-server\n\nAn ACP agent.", FileLines("# acp-server", 3)),  # no final newline
        ("1→first\n2→second", FileLines("first", 2)),
        ("1: first\n2: second\n3: third", FileLines("first", 3)),
        ("  9 | nine\n 10 | ten", FileLines("nine", 2)),  # from an offset: still the first line returned
        ("     1\tonly\n     2", FileLines("only", 2)),  # a numbered empty line without its tab
        (CAT_N + "\n(42 lines)", FileLines("# acp-server", 42)),
        (CAT_N + "... [truncated: showing lines 1-3 of 1,204]", FileLines("# acp-server", 1204)),
        ("[File has 7 lines]\n" + CAT_N, FileLines("# acp-server", 7)),
        ("alpha\nbeta\n\n(showing 2 lines in total)", FileLines("alpha", 2)),
        ("File: README.md (42 lines)\n" + CAT_N, FileLines("# acp-server", 42)),
        (CAT_N + "... (22 more lines)", FileLines("# acp-server", 25)),
        ("1 apple\n2 pears", FileLines("1 apple", 2)),  # numbers with no separator are the file's own
        ("1\tone\n3\tthree", FileLines("1\tone", 2)),  # not consecutive: raw lines
        ("", FileLines(None, 0)),
        ("(empty file)", FileLines(None, 0)),
        ("   \n", FileLines("", 1)),
    ],
)
def test_read_output_lines_raw_or_numbered_with_a_total_when_given(content: str, expected: FileLines) -> None:
    assert parse_read_output(content) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("Error: no such file: nothere.md", "Error: no such file: nothere.md"),
        ("error reading x.py:\n  permission denied", "error reading x.py: permission denied"),
        ("File not found: nothere.md", "File not found: nothere.md"),
        ("Path is outside the working directory: ../x", "Path is outside the working directory: ../x"),
        ("Binary file refused: logo.png", "Binary file refused: logo.png"),
        ('{"error": "not a regular file"}', "not a regular file"),
        ('{"error": {"message": "too large", "code": 1}}', "too large"),
    ],
)
def test_read_output_that_says_it_failed_is_a_failure(content: str, message: str) -> None:
    assert parse_read_output(content) == ReadFailure(message)


def test_content_that_merely_mentions_errors_is_a_file() -> None:
    assert parse_read_output("# Errors\nError: handling") == FileLines("# Errors", 2)
    assert parse_read_output('{"name": "x"}') == FileLines('{"name": "x"}', 1)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant_calls(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
        for i, n, a in calls
    ]
    return {"role": "assistant", "content": "", "tool_calls": tool_calls}


def tool(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_results_of_read_calls_are_answered_in_call_order() -> None:
    messages = [
        user("a.md and b.md?"),
        assistant_calls(
            ("c1", "read_file", {"path": "a.md"}),
            ("c2", "glob", {"pattern": "*"}),
            ("c3", "read_file", {"path": "b.md"}),
            ("c4", "read_file", '{"path": '),  # malformed: no path to speak of
        ),
        tool("c3", "Error: no such file"),
        tool("c2", "a.md\nb.md"),
        tool("c1", [{"type": "text", "text": "one\n"}, {"type": "text", "text": "two\n"}]),
        tool("c4", "Error: bad arguments"),
    ]
    assert answer_from_reads(messages) == (
        "a.md has 2 lines. Its first line is: “one”. I could not read b.md: “Error: no such file”."
    )


def test_a_long_first_line_is_cut_in_the_quote() -> None:
    messages = [user("x.txt"), assistant_calls(("c", "read_file", {"path": "x.txt"})), tool("c", "y" * 300)]
    assert answer_from_reads(messages) == f"x.txt has 1 line. Its first line is: “{'y' * 200}…”."


@pytest.mark.parametrize(
    "messages",
    [
        [user("README.md")],
        [user("x"), assistant_calls(("c", "glob", {"pattern": "*"})), tool("c", "a.md")],
        [user("x"), assistant_calls(("c", "read_file", {"path": "a.md"})), tool("other", "one")],
        [tool("c", "orphan")],
        [user("x"), {"role": "assistant", "content": "no calls"}, tool("c", "one")],
    ],
)
def test_no_answer_from_reads_without_read_results_last(messages: list[Any]) -> None:
    assert answer_from_reads(messages) is None


def test_the_default_calls_read_file_only_when_offered_and_the_user_spoke_last() -> None:
    call = ToolCalls((ScriptedCall("read_file", {"path": "README.md"}),))
    asked = [user("what is in README.md?")]
    assert default_behaviour({"messages": asked, "tools": [GLOB_TOOL, READ_FILE_TOOL]}) == call
    assert default_behaviour({"messages": asked}) == Answer()
    assert default_behaviour({"messages": asked, "tools": [GLOB_TOOL]}) == Answer()
    assert default_behaviour({"messages": [user("hello")], "tools": [READ_FILE_TOOL]}) == Answer()
    after_glob = [*asked, assistant_calls(("c", "glob", {"pattern": "*"})), tool("c", "README.md")]
    assert default_behaviour({"messages": after_glob, "tools": [READ_FILE_TOOL]}) == Answer()
    after_read = [*asked, assistant_calls(("c", "read_file", {"path": "README.md"})), tool("c", CAT_N)]
    expected = Answer(text="README.md has 3 lines. Its first line is: “# acp-server”.")
    assert default_behaviour({"messages": after_read, "tools": [READ_FILE_TOOL]}) == expected


def test_a_plan_prompt_calls_update_plan_when_offered_with_the_first_step_in_progress() -> None:
    plan_tool = {"type": "function", "function": {"name": "update_plan", "parameters": {"type": "object"}}}
    asked = [user("Plan: read notes.txt;  fix it ;; test")]
    entries = [
        {"content": "read notes.txt", "status": "in_progress"},
        {"content": "fix it", "status": "pending"},
        {"content": "test", "status": "pending"},
    ]
    tools = [READ_FILE_TOOL, plan_tool]
    assert default_behaviour({"messages": asked, "tools": tools}) == ToolCalls(
        (ScriptedCall("update_plan", {"entries": entries}),)
    )  # before the path it names: the keyword says what is asked
    read = ToolCalls((ScriptedCall("read_file", {"path": "notes.txt"}),))
    assert default_behaviour({"messages": asked, "tools": [READ_FILE_TOOL]}) == read  # not offered: as before
    after = [*asked, assistant_calls(("p", "update_plan", {"entries": entries})), tool("p", "Plan updated: 3 entries")]
    assert default_behaviour({"messages": after, "tools": tools}) == Answer()  # the loop ends: the prompt echoed
