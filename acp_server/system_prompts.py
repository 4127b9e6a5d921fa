"""A client's own system prompt for a session (ACP ``systemPrompt`` on ``session/new|load|resume|fork``): how it
is stored and combined with the agent's.

``append`` adds the client's text after the agent's whole prompt (how to work, the environment, the project
instructions, the skills); ``override`` replaces only the agent's how-to-work text — the environment and the
project instructions stay, as with ``--system-prompt-file``. Only ``text`` content is accepted, at most
:data:`MAX_SYSTEM_PROMPT_BYTES` of it (UTF-8): ``bridge.check_system_prompt`` refuses anything else naming the
field, for every face.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

__all__ = ["MAX_SYSTEM_PROMPT_BYTES", "SYSTEM_PROMPT_MODES", "ClientPrompt", "SystemPromptMode"]

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
