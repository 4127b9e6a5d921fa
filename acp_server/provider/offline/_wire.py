"""OpenAI wire shapes the loopback model emits, and the text it derives from a prompt (pure, no I/O).

Everything is deterministic: ids come from the request index and ``created`` is a constant, so the same
request sequence yields the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CREATED = 1_700_000_000
DEFAULT_REASONING = "Reading the prompt, then answering it."

_WORD = re.compile(r"\s*\S+(?:\s+$)?")


def split_words(text: str) -> list[str]:
    """Split ``text`` into word chunks, each with its leading whitespace; joined they give ``text`` back."""
    return _WORD.findall(text)


def _text_of(content: object) -> str:
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
                return _text_of(message.get("content"))
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
        len(_text_of(message.get("content")).split()) for message in messages if isinstance(message, Mapping)
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


def completion(
    completion_id: str,
    model: str,
    *,
    content: str,
    reasoning: str,
    finish_reason: str | None,
    usage_: Mapping[str, int],
) -> dict[str, Any]:
    """A non-streamed ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": dict(usage_),
    }


def model_list(model_id: str) -> dict[str, Any]:
    """The ``GET /v1/models`` body: one model."""
    return {
        "object": "list",
        "data": [{"id": model_id, "object": "model", "created": CREATED, "owned_by": "acp-server"}],
    }


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body, which the SDK exposes as ``APIStatusError.body``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}
