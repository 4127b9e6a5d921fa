"""A client's own system prompt for a session (ACP ``systemPrompt`` on ``session/new|load|resume|fork``): how it
is checked as sent, stored and combined with the agent's.

``append`` adds the client's text after the agent's whole prompt (how to work, the environment, the project
instructions, the skills); ``override`` replaces only the agent's how-to-work text — the environment and the
project instructions stay, as with ``--system-prompt-file``. Only ``text`` content is accepted, at most
:data:`MAX_SYSTEM_PROMPT_BYTES` of it (UTF-8); anything else is refused naming the field, never ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

from .errors import InvalidInputError

__all__ = ["MAX_SYSTEM_PROMPT_BYTES", "SYSTEM_PROMPT_MODES", "ClientPrompt", "SystemPromptMode", "client_prompt_sent"]

SystemPromptMode: TypeAlias = Literal["append", "override"]
SYSTEM_PROMPT_MODES: tuple[SystemPromptMode, ...] = ("append", "override")
MAX_SYSTEM_PROMPT_BYTES = 64 * 1024
"""The most text (UTF-8 bytes, all blocks together) a client's system prompt may hold."""


@dataclass(frozen=True, slots=True)
class ClientPrompt:
    """A client's system prompt: its mode and its text (the ``text`` blocks joined by blank lines)."""

    mode: SystemPromptMode
    text: str

    def to_json(self) -> str:
        return json.dumps({"mode": self.mode, "text": self.text})

    @staticmethod
    def from_json(stored: str | None) -> ClientPrompt | None:
        """The prompt of a stored column (NULL, or anything unreadable: none)."""
        if not stored:
            return None
        try:
            value = json.loads(stored)
        except ValueError:
            return None
        if not isinstance(value, dict) or value.get("mode") not in SYSTEM_PROMPT_MODES:
            return None
        text = value.get("text")
        return ClientPrompt(cast(SystemPromptMode, value["mode"]), text) if isinstance(text, str) else None

    def combine(self, agent_base: str) -> tuple[str, str]:
        """(the how-to-work text to use, what follows the agent's whole prompt)."""
        return (self.text, "") if self.mode == "override" else (agent_base, self.text)


def client_prompt_sent(params: Any, method: str) -> ClientPrompt | None:
    """``systemPrompt`` of a session request's params as sent (omitted or null: None); a refusal names the field."""

    def refuse(field: str, problem: str) -> InvalidInputError:
        return InvalidInputError.for_field(field, problem, f"Invalid params for {method}: {field}: {problem}")

    sent = params.get("systemPrompt") if isinstance(params, dict) else None
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
