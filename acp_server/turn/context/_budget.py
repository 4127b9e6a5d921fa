"""How many tokens a request holds, and how many it may hold.

The estimate is a documented rule, not a tokenizer (no tokenizer fits every OpenAI-compatible model family, and a
wrong one is no better): :data:`CHARS_PER_TOKEN` characters per token, :data:`MESSAGE_TOKENS` more per message,
:data:`IMAGE_TOKENS` per image. It is corrected upward, never downward, by what the endpoint reported for the
session's last request (:meth:`Budget.calibrated`): a model whose tokens are shorter than four characters (code,
CJK text) is measured, not guessed.

Invariant: with a known window, a request is compacted before its estimate passes :attr:`Budget.limit`, the
smaller of ``threshold × window`` and ``window − reserve`` (the reserve is room for the answer).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...domain import ContextUsage

__all__ = [
    "ANSWER_SHARE",
    "CHARS_PER_TOKEN",
    "DEFAULT_COMPACT_THRESHOLD",
    "IMAGE_TOKENS",
    "MESSAGE_TOKENS",
    "SUMMARY_SHARE",
    "UNKNOWN_WINDOW_SUMMARY_TOKENS",
    "Budget",
    "json_tokens",
    "message_tokens",
    "messages_tokens",
    "text_tokens",
]

CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (OpenAI's rule of thumb for English text)."""

MESSAGE_TOKENS = 4
"""Tokens a message costs besides its text (role, separators of the chat template)."""

IMAGE_TOKENS = 800
"""Tokens an image part is counted as (a high-detail 512×512 image costs ~765 on OpenAI's models)."""

DEFAULT_COMPACT_THRESHOLD = 80
"""Percent of the context window a request may fill before the conversation is compacted (0: never)."""

ANSWER_SHARE = 0.1
"""The share of the window kept for the answer (sent as the answer's bound, ``max_tokens``, unless configured
otherwise: ``turn/_request_fields.py``)."""

SUMMARY_SHARE = 0.2
"""The share of the window a compaction's summary may take at most, as stored and as sent (the rest is for the
instructions, the tools, the newest turns and the answer)."""

UNKNOWN_WINDOW_SUMMARY_TOKENS = 8_000
"""The most a summary may take when the window is unknown."""

_MAX_RATIO = 4.0
"""The most a reported usage may scale the estimate up (a wild report cannot make every request "too big")."""


def text_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _content_tokens(content: object) -> int:
    if isinstance(content, str):
        return text_tokens(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, Mapping):
                total += IMAGE_TOKENS if part.get("type") == "image_url" else text_tokens(str(part.get("text", "")))
        return total
    return 0


def message_tokens(message: Mapping[str, Any]) -> int:
    """The estimate of one chat message: its content, its tool calls' names and arguments, the overhead."""
    total = MESSAGE_TOKENS + _content_tokens(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        total += MESSAGE_TOKENS + text_tokens(function.get("name", "")) + text_tokens(function.get("arguments", ""))
    return total


def messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(message_tokens(message) for message in messages)


def json_tokens(value: object) -> int:
    """The estimate of a JSON value sent as is (the ``tools`` of a request)."""
    return text_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class Budget:
    """The token budget of one model's requests: its ``window`` (None: unknown), the compaction ``threshold`` in
    percent (0: never compact before a request), and ``ratio``, the correction of the estimate."""

    window: int | None
    threshold: int = DEFAULT_COMPACT_THRESHOLD
    ratio: float = 1.0

    @staticmethod
    def calibrated(window: int | None, threshold: int, usage: ContextUsage | None) -> Budget:
        """The budget corrected by the last reported ``usage``: scaled up when the endpoint counted more tokens
        than estimated, never down (at most ×4)."""
        ratio = 1.0
        if usage is not None and usage.estimated > 0 and usage.reported > usage.estimated:
            ratio = min(usage.reported / usage.estimated, _MAX_RATIO)
        return Budget(window, threshold, ratio)

    @property
    def reserve(self) -> int:
        """Tokens kept for the answer."""
        return 0 if self.window is None else int(self.window * ANSWER_SHARE)

    @property
    def limit(self) -> int | None:
        """The estimate past which a request is compacted first; None: never (window unknown, threshold 0)."""
        if self.window is None or self.threshold <= 0:
            return None
        return min(self.window * self.threshold // 100, self.window - self.reserve)

    @property
    def hard_limit(self) -> int | None:
        """The most a request may hold at all (the window less the answer's room); None when unknown."""
        return None if self.window is None else self.window - self.reserve

    @property
    def summary_tokens(self) -> int:
        """The most a summary may take: :data:`SUMMARY_SHARE` of the window, or
        :data:`UNKNOWN_WINDOW_SUMMARY_TOKENS` when it is unknown."""
        return UNKNOWN_WINDOW_SUMMARY_TOKENS if self.window is None else int(self.window * SUMMARY_SHARE)

    def estimate(self, raw: int) -> int:
        """``raw`` estimated tokens, corrected by the ratio."""
        return math.ceil(raw * self.ratio)

    def over(self, estimate: int) -> bool:
        limit = self.limit
        return limit is not None and estimate > limit
