"""A client's system prompt as a face receives it (ACP ``systemPrompt``, REST ``systemPrompt``): checked once, here,
for every face, before anything is created, loaded, resumed or forked. A refusal names the field."""

from __future__ import annotations

from typing import cast

from ..errors import InvalidInputError
from ..system_prompts import MAX_SYSTEM_PROMPT_BYTES, SYSTEM_PROMPT_MODES, ClientPrompt, SystemPromptMode

__all__ = ["check_system_prompt"]


def check_system_prompt(sent: object) -> ClientPrompt | None:
    """``{mode, content}`` as sent (None: none given): ``append`` or ``override``, a non-empty array of ``text``
    content blocks (joined by blank lines) of at most :data:`MAX_SYSTEM_PROMPT_BYTES` in all."""

    def refuse(field: str, problem: str) -> InvalidInputError:
        return InvalidInputError.for_field(field, problem)

    if sent is None:
        return None
    if not isinstance(sent, dict):
        raise refuse("systemPrompt", "must be an object")
    mode = sent.get("mode")
    if mode not in SYSTEM_PROMPT_MODES:
        raise refuse("systemPrompt.mode", f"unsupported mode {mode!r}: this agent supports 'append' and 'override'")
    content = sent.get("content")
    if not isinstance(content, list) or not content:
        raise refuse("systemPrompt.content", "must be a non-empty array of text content blocks")
    texts: list[str] = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise refuse(f"systemPrompt.content[{i}]", "only text content blocks are supported")
        texts.append(block["text"])
    text = "\n\n".join(texts)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SYSTEM_PROMPT_BYTES:
        raise refuse("systemPrompt.content", f"holds more than {MAX_SYSTEM_PROMPT_BYTES} bytes of text")
    return ClientPrompt(cast(SystemPromptMode, mode), text)
