"""The chat messages a request may carry, checked as the strictest common OpenAI-compatible server checks them.

llama-cpp-python's server validates each message with pydantic and answers a request that fails with HTTP 500 and
the validation error as the message; the loopback model does the same, so a regression in what we send fails the
suite instead of a user's session. The rules (per message): an object with a known ``role``; ``content`` present and
a string or a list of parts (never null, also on an assistant message that only calls tools); an assistant's
``tool_calls`` a list of ``{"id", "type": "function", "function": {"name", "arguments"}}`` with string values; a
``tool`` message's ``tool_call_id`` a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["INVALID_REQUEST_STATUS", "message_problem", "validation_error_body"]

INVALID_REQUEST_STATUS = 500
"""What llama-cpp-python's server answers to a request its models refuse (not 400: it wraps every error)."""

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def _content_problem(content: object) -> str | None:
    if isinstance(content, str):
        return None
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                return "Input should be a valid list of content parts"
        return None
    return "Input should be a valid string"


def _calls_problem(calls: object) -> tuple[str, str] | None:
    if not isinstance(calls, list):
        return "tool_calls", "Input should be a valid list"
    for position, call in enumerate(calls):
        where = f"tool_calls.{position}"
        if not isinstance(call, Mapping):
            return where, "Input should be a valid dictionary"
        function = call.get("function")
        if not isinstance(call.get("id"), str) or call.get("type") != "function" or not isinstance(function, Mapping):
            return where, "Input should be a tool call with 'id', 'type': 'function' and 'function'"
        for key in ("name", "arguments"):
            if not isinstance(function.get(key), str):
                return f"{where}.function.{key}", "Input should be a valid string"
    return None


def message_problem(messages: list[Any]) -> tuple[str, str] | None:
    """``(where, what)`` of the first message the strict server refuses (``where`` like ``messages.2.content``);
    None when every message is acceptable."""
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, Mapping):
            return where, "Input should be a valid dictionary"
        role = message.get("role")
        if role not in _ROLES:
            return f"{where}.role", f"Input should be one of {', '.join(sorted(_ROLES))}"
        if "content" not in message:
            return f"{where}.content", "Field required"
        problem = _content_problem(message["content"])
        if problem is not None:
            return f"{where}.content", problem
        if role == "assistant" and "tool_calls" in message:
            found = _calls_problem(message["tool_calls"])
            if found is not None:
                return f"{where}.{found[0]}", found[1]
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            return f"{where}.tool_call_id", "Input should be a valid string"
    return None


def validation_error_body(where: str, what: str) -> dict[str, Any]:
    """The error body of a refused request, shaped like llama-cpp-python's (an OpenAI error object whose message is
    pydantic's validation error)."""
    message = f"1 validation error for CreateChatCompletionRequest\n{where}\n  {what}"
    return {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}
