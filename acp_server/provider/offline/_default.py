"""The unscripted answer, as a behaviour chosen from the request alone (pure, deterministic).

When the request offers ``update_plan`` and the last message is the user's and starts with ``plan:``, the answer is
one ``update_plan`` call whose entries are the ``;``-separated steps after it (the first ``in_progress``, the others
``pending``). When the request offers a ``read_file`` tool and the last message is the user's and names a relative
file path, the answer is one ``read_file`` call for it; when the last messages are the results of ``read_file``
calls, the answer quotes each file's first line and line count (or the failure); otherwise it echoes the prompt.
So the loop ends after one round: a call only ever answers a user message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import _wire
from ._behaviours import Answer, Behaviour, ScriptedCall, ToolCalls
from ._read_output import FileLines, ReadFailure, parse_read_output

READ_FILE = "read_file"
UPDATE_PLAN = "update_plan"
PLAN_KEYWORD = "plan:"

_STRIP = "\"'`“”‘’«»()[]{}<>*"
_TRAILING = _STRIP + ",;:!?."
_LINE_SUFFIX = re.compile(r":\d+(?::\d+)?$")
_PATH = re.compile(r"[\w.+-]+(?:/[\w.+-]+)*/?")
_EXTENSION = re.compile(r"[^/]\.[0-9_-]*[A-Za-z][\w-]*$|^(?:.*/)?\.[A-Za-z][\w.-]*$")
_WORD = re.compile(r"\w")
_NOT_PATHS = frozenset({"e.g", "i.e", "a.m", "p.m", "u.s"})
_QUOTE_CAP = 200


def _candidate(token: str) -> str | None:
    """``token`` as a relative path with a dot-extension or a slash, once quotes and punctuation are off."""
    path = _LINE_SUFFIX.sub("", token.lstrip(_STRIP).rstrip(_TRAILING))
    if not _PATH.fullmatch(path) or not _WORD.search(path) or path.lower() in _NOT_PATHS:
        return None
    if path.lower().startswith("www."):
        return None
    return path if "/" in path or _EXTENSION.search(path) else None


def path_in_prompt(text: str) -> str | None:
    """The file path ``text`` names: the first token with a dot-extension, else the first with a slash.

    A token is a path once surrounding quotes, backticks, brackets and punctuation (and a ``:12`` line suffix)
    are stripped, if it is relative (no leading ``/`` or ``~``), has no spaces and is no URL.
    """
    candidates = [path for token in text.split() if (path := _candidate(token)) is not None]
    with_extension = [path for path in candidates if _EXTENSION.search(path)]
    preferred = with_extension or candidates
    return preferred[0] if preferred else None


def offers_tool(body: Mapping[str, Any], name: str) -> bool:
    """The request's ``tools`` include a function named ``name``."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return False
    return any(
        isinstance(tool, Mapping)
        and tool.get("type") == "function"
        and isinstance(function := tool.get("function"), Mapping)
        and function.get("name") == name
        for tool in tools
    )


def _quote(text: str) -> str:
    text = text if len(text) <= _QUOTE_CAP else text[:_QUOTE_CAP] + "…"
    return f"“{text}”"


def describe_read(path: str, result: FileLines | ReadFailure) -> str:
    """One sentence about a read: its line count and first line, or why it failed."""
    if isinstance(result, ReadFailure):
        return f"I could not read {path}: {_quote(result.message)}."
    if result.first_line is None:
        return f"{path} is empty."
    lines = "line" if result.line_count == 1 else "lines"
    return f"{path} has {result.line_count} {lines}. Its first line is: {_quote(result.first_line)}."


def _read_path(call: object) -> tuple[str, str] | None:
    """``(id, path)`` of an assistant's ``read_file`` call, if its arguments give a path."""
    if not isinstance(call, Mapping) or not isinstance(function := call.get("function"), Mapping):
        return None
    if function.get("name") != READ_FILE or not isinstance(call_id := call.get("id"), str):
        return None
    try:
        arguments = json.loads(function.get("arguments") or "")
    except (TypeError, ValueError):
        return None
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return (call_id, path) if isinstance(path, str) else None


def answer_from_reads(messages: Sequence[object]) -> str | None:
    """The answer to trailing ``tool`` messages that are results of the preceding assistant's ``read_file``
    calls (one sentence per call, in call order), or None when the last messages are no such results."""
    start = len(messages)
    while start and isinstance(m := messages[start - 1], Mapping) and m.get("role") == "tool":
        start -= 1
    if start == len(messages) or not start:
        return None
    assistant = messages[start - 1]
    calls = assistant.get("tool_calls") if isinstance(assistant, Mapping) else None
    if not isinstance(calls, list):
        return None
    results: dict[object, str] = {}
    for message in messages[start:]:
        assert isinstance(message, Mapping)
        results.setdefault(message.get("tool_call_id"), _wire.text_of(message.get("content")))
    sentences: list[str] = []
    for call in calls:
        read = _read_path(call)
        if read is not None and read[0] in results:
            sentences.append(describe_read(read[1], parse_read_output(results[read[0]])))
    return " ".join(sentences) or None


def plan_in_prompt(text: str) -> list[dict[str, str]] | None:
    """The plan a ``plan: step one; step two`` prompt asks for (the first step in progress); None for another
    prompt."""
    if not text.lower().startswith(PLAN_KEYWORD):
        return None
    steps = [step.strip() for step in text[len(PLAN_KEYWORD) :].split(";") if step.strip()]
    return [{"content": step, "status": "in_progress" if n == 0 else "pending"} for n, step in enumerate(steps)]


def default_behaviour(body: Mapping[str, Any]) -> Behaviour:
    """What the model does with a chat request nothing was scripted for (``body["messages"]`` is a list)."""
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    if (answer := answer_from_reads(messages)) is not None:
        return Answer(text=answer)
    last = messages[-1] if messages else None
    if offers_tool(body, UPDATE_PLAN) and isinstance(last, Mapping) and last.get("role") == "user":
        entries = plan_in_prompt(_wire.text_of(last.get("content")))
        if entries is not None:
            return ToolCalls((ScriptedCall(UPDATE_PLAN, {"entries": entries}),))
    if offers_tool(body, READ_FILE) and isinstance(last, Mapping) and last.get("role") == "user":
        path = path_in_prompt(_wire.text_of(last.get("content")))
        if path is not None:
            return ToolCalls((ScriptedCall(READ_FILE, {"path": path}),))
    return Answer()
