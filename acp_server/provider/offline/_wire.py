"""OpenAI wire shapes the loopback model emits, and the text it derives from a prompt (pure, no I/O).

Everything is deterministic: ids come from the request index and ``created`` is a constant, so the same
request sequence yields the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

CREATED = 1_700_000_000
DEFAULT_REASONING = "Reading the prompt, then answering it."

_WORD = re.compile(r"\s*\S+(?:\s+$)?")


def split_words(text: str) -> list[str]:
    """Split ``text`` into word chunks, each with its leading whitespace; joined they give ``text`` back."""
    return _WORD.findall(text)


def text_of(content: object) -> str:
    """A message's ``content`` as text: a string as is, a list's ``text`` parts joined, anything else ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last ``user`` message (text parts joined), or ``""``."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return text_of(message.get("content"))
    return ""


def derived_answer(prompt: str) -> str:
    """The default answer to ``prompt``."""
    prompt = prompt.strip()
    return f"You said: {prompt}" if prompt else "You said nothing."


def count_prompt_words(body: Mapping[str, Any]) -> int:
    """Words across all messages: the loopback model's notion of prompt tokens."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(
        len(text_of(message.get("content")).split()) for message in messages if isinstance(message, Mapping)
    )


def chunk(
    completion_id: str, model: str, delta: Mapping[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}],
    }


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def usage_chunk(completion_id: str, model: str, usage_: Mapping[str, int]) -> dict[str, Any]:
    """The trailing chunk sent for ``stream_options.include_usage``: no choices, only usage."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [],
        "usage": dict(usage_),
    }


def call_id(request_index: int, position: int) -> str:
    """The id of a scripted tool call that has none: unique per request and position, deterministic."""
    return f"call_loopback_{request_index}_{position}"


def tool_call(call_id_: str, name: str, arguments: str) -> dict[str, Any]:
    """A complete tool call, as a non-streamed message's ``tool_calls`` lists it."""
    return {"id": call_id_, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_call_fragments(
    index: int, call_id_: str, name: str, arguments: str, fragment_size: int | None
) -> list[dict[str, Any]]:
    """The ``delta.tool_calls`` entries streaming one call, one per chunk: the first with ``index``, ``id``,
    ``type``, ``name`` and empty ``arguments``, then ``arguments`` in pieces of ``fragment_size`` characters;
    ``fragment_size`` None = one entry with everything. Joined, the ``arguments`` give ``arguments`` back."""
    if fragment_size is None:
        return [{"index": index, **tool_call(call_id_, name, arguments)}]
    head = {"index": index, **tool_call(call_id_, name, "")}
    pieces = [arguments[i : i + fragment_size] for i in range(0, len(arguments), fragment_size)]
    return [head, *({"index": index, "function": {"arguments": piece}} for piece in pieces)]


def completion(
    completion_id: str,
    model: str,
    *,
    content: str | None,
    reasoning: str,
    finish_reason: str | None,
    usage_: Mapping[str, int],
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A non-streamed ``chat.completion``; ``tool_calls`` (complete calls) goes into its message when given."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": dict(usage_),
    }


def output_bound(body: Mapping[str, Any]) -> int | None:
    """The request's bound on the answer's tokens: ``max_completion_tokens``, else ``max_tokens``; None: none."""
    for field in ("max_completion_tokens", "max_tokens"):
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def unsupported_parameter(field: str) -> dict[str, Any]:
    """OpenAI's refusal of a request field the model does not take, word for word (its reasoning models and
    ``max_tokens``)."""
    message = f"Unsupported parameter: '{field}' is not supported with this model."
    if field == "max_tokens":
        message += " Use 'max_completion_tokens' instead."
    error = {"message": message, "type": "invalid_request_error", "param": field}
    return {"error": {**error, "code": "unsupported_parameter"}}


def model_list(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``GET /v1/models`` body: each entry (an ``id``, maybe more fields) as an OpenAI model object."""
    return {
        "object": "list",
        "data": [{"object": "model", "created": CREATED, "owned_by": "acp-server", **entry} for entry in entries],
    }


def context_length_exceeded(window: int, tokens: int) -> dict[str, Any]:
    """OpenAI's refusal of a request longer than the model's context window, word for word."""
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} "
        "tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return {"error": {**error, "code": "context_length_exceeded"}}


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body, which the SDK exposes as ``APIStatusError.body``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}
